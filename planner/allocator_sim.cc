#include "planner/allocator_sim.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace memplan {
namespace {

// Constants of c10/cuda/CUDACachingAllocator.cpp.
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kMinBlockSize = 512;      // every size is a multiple of this
constexpr int64_t kSmallSize = 1 * kMiB;    // largest small-pool request
constexpr int64_t kSmallBuffer = 2 * kMiB;  // small-pool segment (and page) size
constexpr int64_t kMinLargeAlloc = 10 * kMiB;
constexpr int64_t kLargeBuffer = 20 * kMiB;  // large segment (and expandable page) size
constexpr int64_t kRoundLarge = 2 * kMiB;
// Largest request (1 PiB) and largest total we accept: keeps every sum far
// from int64 overflow.
constexpr int64_t kMaxRequest = int64_t{1} << 50;
constexpr int64_t kMaxTotal = int64_t{1} << 60;
// Virtual size of an expandable segment: never the limiting factor.
constexpr int64_t kExpandableVirtualSize = int64_t{1} << 61;

struct Block {
  int64_t offset = 0;
  int64_t size = 0;
  int segment = -1;
  int prev = -1;  // neighbour at lower address in the same segment
  int next = -1;  // neighbour at higher address
  bool allocated = false;
  bool mapped = true;  // false only for unmapped ranges of expandable segments
};

// Free mapped blocks of a pool ordered by (size, address): best fit is
// lower_bound on the size, ties go to the lowest address as in PyTorch's
// BlockComparatorSize. An address is (segment address rank, offset).
// `block` is payload, not part of the order.
struct FreeKey {
  int64_t size;
  int64_t segment_addr;
  int64_t offset;
  int block;
};
struct FreeKeyLess {
  bool operator()(const FreeKey& a, const FreeKey& b) const {
    if (a.size != b.size) return a.size < b.size;
    if (a.segment_addr != b.segment_addr) return a.segment_addr < b.segment_addr;
    return a.offset < b.offset;
  }
};
constexpr int64_t kLowestKey = std::numeric_limits<int64_t>::min();

// Unmapped ranges of expandable segments ordered by address.
struct AddrKey {
  int segment;
  int64_t offset;
  int block;
};
struct AddrKeyLess {
  bool operator()(const AddrKey& a, const AddrKey& b) const {
    if (a.segment != b.segment) return a.segment < b.segment;
    return a.offset < b.offset;
  }
};

// Tree nodes of the free-block sets are recycled: a replay inserts and
// erases a node for nearly every event (millions for a large graph), and
// each would otherwise be a malloc and a free. Freed nodes wait on a
// per-thread list of their size; the list frees them when the thread ends.
template <typename T>
struct RecycledNodes {
  using value_type = T;
  RecycledNodes() = default;
  template <typename U>
  RecycledNodes(const RecycledNodes<U>&) {}  // NOLINT(runtime/explicit): rebinding
  T* allocate(size_t n) {
    std::vector<void*>& spare = Spare();
    if (n == 1 && !spare.empty()) {
      void* p = spare.back();
      spare.pop_back();
      return static_cast<T*>(p);
    }
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) {
    if (n == 1) {
      Spare().push_back(p);
    } else {
      std::allocator<T>().deallocate(p, n);
    }
  }
  template <typename U>
  bool operator==(const RecycledNodes<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const RecycledNodes<U>&) const {
    return false;
  }

 private:
  struct List {
    std::vector<void*> nodes;
    ~List() {
      for (void* p : nodes) std::allocator<T>().deallocate(static_cast<T*>(p), 1);
    }
  };
  static std::vector<void*>& Spare() {
    thread_local List list;
    return list.nodes;
  }
};

using FreeSet = std::set<FreeKey, FreeKeyLess, RecycledNodes<FreeKey>>;

struct Pool {
  bool small = false;
  FreeSet free;
  std::set<AddrKey, AddrKeyLess, RecycledNodes<AddrKey>> unmapped;
};

struct Segment {
  bool small = false;
  int64_t mapped = 0;  // bytes of this segment counted in reserved now
  int64_t addr = 0;    // rank of the segment's base address
};

class Simulator {
 public:
  Simulator(const AllocatorConfig& config, SimResult* result) : config_(config), result_(result) {
    small_.small = true;
  }

  int64_t allocated() const { return allocated_; }
  int64_t reserved() const { return reserved_; }

  /// Serves one request of `bytes` > 0; returns the block index, or -1 when
  /// the device limit is hit even after releasing cached memory.
  int Malloc(int64_t bytes, size_t event) {
    const int64_t size = RoundAllocation(bytes);
    Pool& pool = size <= kSmallSize ? small_ : large_;
    const int64_t alloc_size = SegmentAllocationSize(size);
    int b = GetFreeBlock(pool, size);
    if (b < 0) {
      b = AllocBlock(pool, size, alloc_size, event);
      if (b < 0 && ReleaseAvailableCachedBlocks(pool, size)) {
        b = AllocBlock(pool, size, alloc_size, event);
      }
      if (b < 0) {
        ++result_->alloc_retries;
        ReleaseCachedBlocks();
        b = AllocBlock(pool, size, alloc_size, event);
      }
      if (b < 0) return -1;
    }
    if (ShouldSplit(pool, b, size)) {
      // The request takes the front; the rest stays free after it.
      const int front = NewBlock();
      Block& rest = blocks_[b];
      Block& f = blocks_[front];
      f.offset = rest.offset;
      f.size = size;
      f.segment = rest.segment;
      f.prev = rest.prev;
      f.next = b;
      if (f.prev >= 0) blocks_[f.prev].next = front;
      rest.prev = front;
      rest.offset += size;
      rest.size -= size;
      InsertFree(pool, b);
      b = front;
    }
    blocks_[b].allocated = true;
    allocated_ += blocks_[b].size;
    return b;
  }

  /// Returns block `b` to its pool, merging with free neighbours.
  void Free(int b) {
    Block& blk = blocks_[b];
    assert(blk.allocated);
    blk.allocated = false;
    allocated_ -= blk.size;
    Pool& pool = PoolOf(b);
    TryMerge(pool, b, blocks_[b].prev);
    TryMerge(pool, b, blocks_[b].next);
    InsertFree(pool, b);
  }

  const Block& block(int b) const { return blocks_[b]; }

  // torch.cuda.empty_cache(): cached segments go back to the driver.
  void EmptyCache() { ReleaseCachedBlocks(); }

  /// Hands what decides every later request (CachingAllocatorReplay::State)
  /// to `emit`, one value at a time, until it returns false; holder[b]: the
  /// id holding allocated block b. Block indices are left out: they only name
  /// blocks (free blocks are ordered by size and address). False when `emit`
  /// stopped it.
  template <typename Emit>
  bool EmitState(const std::vector<int64_t>& holder, Emit&& emit) const {
    for (int64_t v : {allocated_, reserved_, next_low_addr_, next_high_addr_,
                      static_cast<int64_t>(segments_.size())}) {
      if (!emit(v)) return false;
    }
    std::vector<int> head(segments_.size(), -1);
    for (size_t b = 0; b < blocks_.size(); ++b) {
      if (blocks_[b].segment >= 0 && blocks_[b].prev < 0)
        head[blocks_[b].segment] = static_cast<int>(b);
    }
    for (size_t k = 0; k < segments_.size(); ++k) {
      for (int64_t v :
           {int64_t{segments_[k].small ? 1 : 0}, segments_[k].mapped, segments_[k].addr}) {
        if (!emit(v)) return false;
      }
      for (int b = head[k]; b >= 0; b = blocks_[b].next) {
        const Block& blk = blocks_[b];
        for (int64_t v : {blk.offset, blk.size, int64_t{blk.allocated ? 1 : 0},
                          int64_t{blk.mapped ? 1 : 0}, blk.allocated ? holder[b] : 0}) {
          if (!emit(v)) return false;
        }
      }
      if (!emit(-1)) return false;  // end of the segment's blocks
    }
    return true;
  }

 private:
  Pool& PoolOf(int b) { return segments_[blocks_[b].segment].small ? small_ : large_; }
  int64_t PageSize(const Pool& pool) const { return pool.small ? kSmallBuffer : kLargeBuffer; }

  int NewBlock() {
    if (!free_slots_.empty()) {
      const int b = free_slots_.back();
      free_slots_.pop_back();
      blocks_[b] = Block();
      return b;
    }
    blocks_.emplace_back();
    free_at_.emplace_back();
    return static_cast<int>(blocks_.size()) - 1;
  }
  void DeleteBlock(int b) {
    blocks_[b].segment = -1;
    free_slots_.push_back(b);
  }

  FreeKey KeyOf(const Block& blk, int b) const {
    return {blk.size, segments_[blk.segment].addr, blk.offset, b};
  }
  // A free block's place in its pool's set is kept (free_at_), so that
  // taking it out (a merge, a release) needs no search.
  void InsertFree(Pool& pool, int b) { free_at_[b] = pool.free.insert(KeyOf(blocks_[b], b)).first; }
  void EraseFree(Pool& pool, int b) { pool.free.erase(free_at_[b]); }
  void InsertUnmapped(Pool& pool, int b) {
    pool.unmapped.insert({blocks_[b].segment, blocks_[b].offset, b});
  }
  void EraseUnmapped(Pool& pool, int b) {
    pool.unmapped.erase({blocks_[b].segment, blocks_[b].offset, b});
  }

  // Size a free block could reach by mapping the unmapped range after it.
  int64_t ExpandableSize(int b) const {
    const Block& blk = blocks_[b];
    if (blk.next >= 0 && !blocks_[blk.next].mapped) return blk.size + blocks_[blk.next].size;
    return blk.size;
  }

  // get_free_block: best fit, then the max_split_size rules on that one block.
  int GetFreeBlock(Pool& pool, int64_t size) {
    auto it = pool.free.lower_bound({size, kLowestKey, kLowestKey, -1});
    if (it == pool.free.end()) return -1;
    if (config_.expandable_segments) {
      // Best fit by the size a block can grow to: skip past the block at the
      // growing end of the segment when a later (bigger) block can grow less.
      auto next = std::next(it);
      while (next != pool.free.end() && ExpandableSize(next->block) < ExpandableSize(it->block)) {
        it = next++;
      }
    }
    const int64_t max_split = config_.max_split_size;
    if (size < max_split && it->size >= max_split) return -1;
    if (size >= max_split && it->size >= size + kLargeBuffer) return -1;
    const int b = it->block;
    pool.free.erase(it);
    return b;
  }

  bool ShouldSplit(const Pool& pool, int b, int64_t size) const {
    const int64_t remaining = blocks_[b].size - size;
    if (pool.small || config_.expandable_segments) return remaining >= kMinBlockSize;
    return size < config_.max_split_size && remaining > kSmallSize;
  }

  bool Fits(int64_t extra) const {
    return config_.device_limit <= 0 || reserved_ + extra <= config_.device_limit;
  }

  // The CUDA driver (H200, driver 580) maps segments larger than 20 MiB
  // below every earlier one and smaller ones above (85 % and 80 % of the
  // segments in PyTorch allocator traces, bench/memtrace.py): among equal
  // free blocks, the newest large segment has the lowest address.
  int NewSegment(const Pool& pool, int64_t recorded_bytes, size_t event) {
    const int64_t addr = recorded_bytes > kLargeBuffer ? --next_low_addr_ : ++next_high_addr_;
    segments_.push_back({pool.small, 0, addr});
    result_->segment_bytes.push_back(recorded_bytes);
    result_->segment_created.push_back(event);
    return static_cast<int>(segments_.size()) - 1;
  }

  // alloc_block: a new cudaMalloc segment, or pages of the expandable segment.
  // The returned block is in no set.
  int AllocBlock(Pool& pool, int64_t size, int64_t alloc_size, size_t event) {
    if (config_.expandable_segments) return TryAllocateExpandable(pool, size, event);
    if (!Fits(alloc_size)) return -1;
    const int seg = NewSegment(pool, alloc_size, event);
    segments_[seg].mapped = alloc_size;
    reserved_ += alloc_size;
    const int b = NewBlock();
    blocks_[b].size = alloc_size;
    blocks_[b].segment = seg;
    return b;
  }

  // Releases one whole free segment `b` (release_block).
  void ReleaseBlock(Pool& pool, int b) {
    EraseFree(pool, b);
    reserved_ -= blocks_[b].size;
    segments_[blocks_[b].segment].mapped = 0;
    DeleteBlock(b);
  }

  // release_available_cached_blocks: with max_split_size set, free the
  // smallest oversize cached segment that covers the request, else the
  // largest ones until they add up to it. Oversize free blocks are always
  // whole segments (a block >= max_split_size is never split), so this is
  // exact.
  bool ReleaseAvailableCachedBlocks(Pool& pool, int64_t size) {
    const int64_t max_split = config_.max_split_size;
    if (max_split == std::numeric_limits<int64_t>::max() || config_.expandable_segments) {
      return false;
    }
    const int64_t target = std::max(size, max_split);
    auto it = pool.free.lower_bound({target, kLowestKey, kLowestKey, -1});
    if (it != pool.free.end()) {
      ReleaseBlock(pool, it->block);
      return true;
    }
    int64_t released = 0;
    while (released < target && !pool.free.empty()) {
      auto last = std::prev(pool.free.end());
      if (last->size < max_split) break;
      released += last->size;
      ReleaseBlock(pool, last->block);
    }
    return released >= target;
  }

  // release_cached_blocks: every fully free segment goes back to the driver;
  // in expandable segments every whole free page is unmapped.
  void ReleaseCachedBlocks() {
    for (Pool* pool : {&large_, &small_}) {
      std::vector<int> candidates;
      candidates.reserve(pool->free.size());
      for (const FreeKey& k : pool->free) candidates.push_back(k.block);
      for (int b : candidates) {
        if (config_.expandable_segments) {
          UnmapBlock(*pool, b);
        } else if (blocks_[b].prev < 0 && blocks_[b].next < 0) {
          ReleaseBlock(*pool, b);
        }
      }
    }
  }

  // try_merge_blocks: `dst` (in no set) absorbs its free neighbour `src` of
  // the same mapped state.
  bool TryMerge(Pool& pool, int dst, int src) {
    if (src < 0) return false;
    Block& s = blocks_[src];
    Block& d = blocks_[dst];
    if (s.allocated || s.mapped != d.mapped) return false;
    if (s.mapped) {
      EraseFree(pool, src);
    } else {
      EraseUnmapped(pool, src);
    }
    if (d.prev == src) {
      d.offset = s.offset;
      d.prev = s.prev;
      if (d.prev >= 0) blocks_[d.prev].next = dst;
    } else {
      d.next = s.next;
      if (d.next >= 0) blocks_[d.next].prev = dst;
    }
    d.size += s.size;
    DeleteBlock(src);
    return true;
  }

  // ---- expandable segments -------------------------------------------------

  int FindExpandableBlock(Pool& pool, int64_t size, size_t event) {
    auto allocatable = [&](int b) { return b >= 0 && !blocks_[b].allocated; };
    for (const AddrKey& k : pool.unmapped) {
      int c = k.block;
      if (allocatable(blocks_[c].prev)) c = blocks_[c].prev;
      int64_t bytes = 0;
      for (int b = c; bytes < size && allocatable(b); b = blocks_[b].next) bytes += blocks_[b].size;
      if (bytes >= size) return c;
    }
    const int seg = NewSegment(pool, 0, event);
    const int b = NewBlock();
    blocks_[b].size = kExpandableVirtualSize;
    blocks_[b].segment = seg;
    blocks_[b].mapped = false;
    InsertUnmapped(pool, b);
    return b;
  }

  // map_block: maps whole pages covering `bytes` from the start of the
  // unmapped block `b`; the mapped part joins free neighbours.
  bool MapBlock(Pool& pool, int b, int64_t bytes) {
    const int64_t page = PageSize(pool);
    assert(blocks_[b].offset % page == 0);
    const int64_t mapped = std::min(blocks_[b].size, (bytes + page - 1) / page * page);
    if (!Fits(mapped)) return false;
    EraseUnmapped(pool, b);
    blocks_[b].mapped = true;
    if (mapped < blocks_[b].size) {
      const int rest = NewBlock();
      Block& r = blocks_[rest];
      Block& blk = blocks_[b];
      r.offset = blk.offset + mapped;
      r.size = blk.size - mapped;
      r.segment = blk.segment;
      r.mapped = false;
      r.prev = b;
      r.next = blk.next;
      if (r.next >= 0) blocks_[r.next].prev = rest;
      blk.next = rest;
      blk.size = mapped;
      InsertUnmapped(pool, rest);
    }
    TryMerge(pool, b, blocks_[b].prev);
    TryMerge(pool, b, blocks_[b].next);
    InsertFree(pool, b);
    reserved_ += mapped;
    Segment& seg = segments_[blocks_[b].segment];
    seg.mapped += mapped;
    int64_t& high = result_->segment_bytes[blocks_[b].segment];
    high = std::max(high, seg.mapped);
    return true;
  }

  int TryAllocateExpandable(Pool& pool, int64_t size, size_t event) {
    int c = FindExpandableBlock(pool, size, event);
    if (!blocks_[c].mapped && !MapBlock(pool, c, std::min(blocks_[c].size, size))) return -1;
    while (blocks_[c].size < size) {
      const int next = blocks_[c].next;
      const int64_t missing = size - blocks_[c].size;
      if (!MapBlock(pool, next, std::min(missing, blocks_[next].size))) return -1;
      c = next;  // `next` absorbed `c` when it was mapped
    }
    EraseFree(pool, c);
    return c;
  }

  // unmap_block: unmaps the whole pages inside free block `b`; partial pages
  // at either end stay mapped as free blocks.
  void UnmapBlock(Pool& pool, int b) {
    const int64_t page = PageSize(pool);
    const int64_t start = blocks_[b].offset;
    const int64_t end = start + blocks_[b].size;
    const int64_t first_page = (start + page - 1) / page * page;
    const int64_t last_page = end / page * page;
    if (first_page >= last_page) return;
    EraseFree(pool, b);
    if (first_page > start) {
      const int before = NewBlock();
      Block& nb = blocks_[before];
      Block& blk = blocks_[b];
      nb.offset = start;
      nb.size = first_page - start;
      nb.segment = blk.segment;
      nb.prev = blk.prev;
      nb.next = b;
      if (nb.prev >= 0) blocks_[nb.prev].next = before;
      blk.prev = before;
      InsertFree(pool, before);
    }
    if (last_page < end) {
      const int after = NewBlock();
      Block& na = blocks_[after];
      Block& blk = blocks_[b];
      na.offset = last_page;
      na.size = end - last_page;
      na.segment = blk.segment;
      na.prev = b;
      na.next = blk.next;
      if (na.next >= 0) blocks_[na.next].prev = after;
      blk.next = after;
      InsertFree(pool, after);
    }
    const int64_t unmapped = last_page - first_page;
    blocks_[b].offset = first_page;
    blocks_[b].size = unmapped;
    blocks_[b].mapped = false;
    segments_[blocks_[b].segment].mapped -= unmapped;
    reserved_ -= unmapped;
    TryMerge(pool, b, blocks_[b].prev);
    TryMerge(pool, b, blocks_[b].next);
    InsertUnmapped(pool, b);
  }

  const AllocatorConfig& config_;
  SimResult* result_;
  std::vector<Block> blocks_;
  std::vector<int> free_slots_;
  std::vector<FreeSet::iterator> free_at_;  // per block, while it is in a free set
  int64_t next_low_addr_ = 0;
  int64_t next_high_addr_ = 0;
  std::vector<Segment> segments_;
  Pool small_;
  Pool large_;
  int64_t allocated_ = 0;
  int64_t reserved_ = 0;
};

std::string EventPrefix(size_t i) { return "event " + std::to_string(i) + ": "; }

// The live ids of a replay and the block each holds (-1 for size 0). The
// planner numbers its allocations 1, 2, 3, ...: such ids index a vector (no
// hash node per allocation); any other ids (a recorded trace's) go to a hash
// map. Events can be added between replays: Admit looks at each new stretch.
class LiveIds {
 public:
  /// Makes room for the ids of events [from, end).
  void Admit(const std::vector<MemEvent>& events, size_t from, size_t end) {
    if (!dense_) return;
    int64_t most = static_cast<int64_t>(slots_.size()) - 1;
    const int64_t limit = 2 * static_cast<int64_t>(end) + 1024;
    for (size_t i = from; i < end; ++i) {
      const MemEvent& e = events[i];
      if (e.empty_cache) continue;
      if (e.id < 0 || e.id > limit) {
        ToMap();
        map_.reserve(end - from);
        return;
      }
      most = std::max(most, e.id);
    }
    if (most >= static_cast<int64_t>(slots_.size()))
      slots_.resize(static_cast<size_t>(most) + 1, kNotLive);
  }
  /// Marks `id` live (block -1); false when it already is.
  bool Insert(int64_t id) {
    if (!dense_) return map_.emplace(id, -1).second;
    int& slot = slots_[static_cast<size_t>(id)];
    if (slot != kNotLive) return false;
    slot = -1;
    return true;
  }
  /// The block slot of live `id`, or nullptr when it is not live.
  int* Find(int64_t id) {
    if (!dense_) {
      auto it = map_.find(id);
      return it == map_.end() ? nullptr : &it->second;
    }
    if (id < 0 || static_cast<size_t>(id) >= slots_.size()) return nullptr;
    int& slot = slots_[static_cast<size_t>(id)];
    return slot == kNotLive ? nullptr : &slot;
  }
  void Erase(int64_t id) {
    if (!dense_) {
      map_.erase(id);
    } else {
      slots_[static_cast<size_t>(id)] = kNotLive;
    }
  }

 private:
  void ToMap() {
    for (size_t id = 0; id < slots_.size(); ++id) {
      if (slots_[id] != kNotLive) map_.emplace(static_cast<int64_t>(id), slots_[id]);
    }
    dense_ = false;
    slots_.clear();
    slots_.shrink_to_fit();
  }
  static constexpr int kNotLive = -2;
  bool dense_ = true;
  std::vector<int> slots_;
  std::unordered_map<int64_t, int> map_;
};

}  // namespace

int64_t RoundAllocation(int64_t bytes) {
  if (bytes <= 0) return 0;
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

int64_t SegmentAllocationSize(int64_t rounded_bytes) {
  if (rounded_bytes <= kSmallSize) return kSmallBuffer;
  if (rounded_bytes < kMinLargeAlloc) return kLargeBuffer;
  return (rounded_bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

struct CachingAllocatorReplay::Impl {
  Impl(const AllocatorConfig& config, SimResult* result) : sim(config, result) {}
  Simulator sim;
  LiveIds live;                 // id -> block, -1 for size 0
  std::vector<int64_t> holder;  // block -> the live id holding it (State)
};

CachingAllocatorReplay::CachingAllocatorReplay(const AllocatorConfig& config) : config_(config) {
  if (config_.max_split_size < kLargeBuffer) {
    error_ = Status::Error("max_split_size " + std::to_string(config_.max_split_size) +
                           " is below 20 MiB (PyTorch rejects max_split_size_mb < 20)");
  } else if (config_.device_limit < 0) {
    error_ = Status::Error("device_limit " + std::to_string(config_.device_limit) + " is negative");
  } else {
    impl_ = new Impl(config_, &result_);
  }
}

CachingAllocatorReplay::~CachingAllocatorReplay() { delete impl_; }

namespace {

// One event replayed: its block index (-1: none taken) in *block; an error
// for a malformed event; r.oom set where the device limit stops it.
Status ReplayOne(const MemEvent& e, size_t i, Simulator& sim, LiveIds& live,
                 std::vector<int64_t>* holder, SimResult& r, int* block) {
  *block = -1;
  if (e.empty_cache) {
    sim.EmptyCache();
  } else if (e.is_alloc) {
    if (e.bytes < 0) {
      return Status::Error(EventPrefix(i) + "negative size " + std::to_string(e.bytes) +
                           " for id " + std::to_string(e.id));
    }
    if (e.bytes > kMaxRequest) {
      return Status::Error(EventPrefix(i) + "size " + std::to_string(e.bytes) + " for id " +
                           std::to_string(e.id) + " is too large");
    }
    if (!live.Insert(e.id)) {
      return Status::Error(EventPrefix(i) + "id " + std::to_string(e.id) +
                           " is allocated twice without a free");
    }
    if (e.bytes > 0) {
      const int b = sim.Malloc(e.bytes, i);
      if (b < 0) {
        r.oom = true;
        r.oom_event = i;
      } else {
        *live.Find(e.id) = b;
        if (holder != nullptr) {
          if (static_cast<size_t>(b) >= holder->size()) holder->resize(b + 1, 0);
          (*holder)[b] = e.id;
        }
        *block = b;
      }
      if (sim.reserved() > kMaxTotal) {
        return Status::Error(EventPrefix(i) + "more than 2^60 bytes reserved");
      }
    }
  } else {
    int* b = live.Find(e.id);
    if (b == nullptr)
      return Status::Error(EventPrefix(i) + "free of unknown id " + std::to_string(e.id));
    if (*b >= 0) sim.Free(*b);
    live.Erase(e.id);
  }
  return Status();
}

}  // namespace

Status CachingAllocatorReplay::Replay(const std::vector<MemEvent>& events, size_t end) {
  if (!error_.ok()) return error_;
  SimResult& r = result_;
  const size_t from = replayed();
  if (r.oom || r.stopped_above || end <= from) return Status();
  end = std::min(end, events.size());
  if (!observer_) {
    // Room for every event there is now: a replay in parts does not regrow.
    r.allocated_after.reserve(events.size());
    r.reserved_after.reserve(events.size());
    r.placements.reserve(events.size());
  }
  Simulator& sim = impl_->sim;
  LiveIds& live = impl_->live;
  live.Admit(events, from, end);
  for (size_t i = from; i < end; ++i) {
    int b = -1;
    Status st = ReplayOne(events[i], i, sim, live, &impl_->holder, r, &b);
    if (!st.ok()) {
      error_ = st;
      return error_;
    }
    if (sim.allocated() > r.peak_allocated) {
      r.peak_allocated = sim.allocated();
      r.peak_event = i;
      r.reserved_at_peak = sim.reserved();
    }
    r.peak_reserved = std::max(r.peak_reserved, sim.reserved());
    if (observer_) {
      ++observed_;
      if (!r.oom &&
          !observer_(i, b >= 0 ? sim.block(b).size : 0, sim.allocated(), sim.reserved())) {
        r.stopped_above = true;
        break;
      }
    } else {
      Placement placement;
      if (b >= 0) {
        placement.segment = sim.block(b).segment;
        placement.offset = sim.block(b).offset;
        placement.block = sim.block(b).size;
      }
      r.placements.push_back(placement);
      r.allocated_after.push_back(sim.allocated());
      r.reserved_after.push_back(sim.reserved());
    }
    if (r.oom) break;
    if (stop_reserved_ >= 0 && i < stop_before_ && sim.reserved() > stop_reserved_) {
      r.stopped_above = true;
      break;
    }
  }
  return Status();
}

std::vector<int64_t> CachingAllocatorReplay::State() const {
  std::vector<int64_t> out;
  if (impl_ == nullptr) return out;
  out.push_back(result_.alloc_retries);
  out.push_back(result_.oom ? 1 : 0);
  (void)impl_->sim.EmitState(impl_->holder, [&out](int64_t v) {
    out.push_back(v);
    return true;
  });
  return out;
}

bool CachingAllocatorReplay::StateEquals(const std::vector<int64_t>& state) const {
  if (impl_ == nullptr) return state.empty();
  size_t at = 0;
  auto next = [&state, &at](int64_t v) { return at < state.size() && state[at++] == v; };
  return next(result_.alloc_retries) && next(result_.oom ? 1 : 0) &&
         impl_->sim.EmitState(impl_->holder, next) && at == state.size();
}

Result<SimResult> SimulateCachingAllocator(const std::vector<MemEvent>& events,
                                           const AllocatorConfig& config) {
  CachingAllocatorReplay replay(config);
  Status s = replay.Replay(events, events.size());
  if (!s.ok()) return s;
  return replay.TakeResult();
}

}  // namespace memplan
