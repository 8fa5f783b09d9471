#ifndef MEMPLAN_PLANNER_DISTRIBUTED_H_
#define MEMPLAN_PLANNER_DISTRIBUTED_H_

/// Data parallelism over several GPUs: the peak of one rank.
///
/// The single-process step (its allocator events, with the parameter and the
/// module each event belongs to) is rewritten into the events one rank makes
/// under the strategy, then replayed through the allocator model again. The
/// mechanisms, from PyTorch's and DeepSpeed's sources:
/// - DDP (torch/nn/parallel/distributed.py, torch/csrc/distributed/c10d/
///   reducer.cpp): the constructor broadcasts parameters and buffers from rank
///   0 in coalesced chunks of 250 MiB (a flat copy per chunk, freed after);
///   the reducer allocates one flat bucket per group of parameters, in reverse
///   registration order, the first closed at 1 MiB and the others at 25 MiB
///   (bucket_cap_mb); with gradient_as_bucket_view=False (the default) the
///   buckets live as long as the model, beside the gradients they copy. The
///   second iteration rebuilds the buckets in gradient-ready order (new ones
///   allocated before the old are dropped).
/// - FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_param.py,
///   _fsdp_param_group.py, _fsdp_collectives.py): fully_shard per unit, then
///   the root. Each parameter becomes its dim-0 chunk padded to
///   ceil(dim0 / N) rows; an unshard allocates the unit's flat all-gather
///   output (N x the padded shards) and then the unsharded parameters it is
///   copied into. In forward the flat output is kept until the next unit's
///   all-gather (AllGatherState), in backward it is freed after the copy;
///   the pre-backward of a unit prefetches the unit that runs before it in
///   forward. reshard_after_forward frees a unit's unsharded parameters after
///   its forward (never the root's: it runs first in backward). After a
///   unit's backward: reshard, then a flat reduce-scatter input (N x the
///   padded shards) the unsharded gradients are copied into, those freed, and
///   an output of one padded shard that becomes the sharded gradients; the
///   input is kept until the next unit's reduce-scatter (ReduceScatterState).
/// - ZeRO (DeepSpeed's documentation, stage 1 / 2 / 3): optimizer state,
///   then gradients, then parameters partitioned over the ranks. Stage 1
///   all-reduces the full gradients through one flat bucket of
///   min(reduce_bucket_size = 5e8 elements, all gradients); stage 2 copies
///   each gradient into that bucket as it is produced and keeps only its
///   partition (a flat buffer of 1/N of the gradients); stage 3 gathers and
///   partitions parameters per unit like FSDP, without keeping the previous
///   unit's collective buffers. No ZeRO run is measured (see README).
/// - NCCL's communicators and their buffers live outside PyTorch's
///   allocator: kNcclDeviceBytes more device memory per rank.

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/options.h"
#include "planner/plan.h"
#include "planner/status.h"

namespace memplan {

/// Device memory NCCL holds per rank outside the caching allocator, beyond
/// the CUDA context (kDefaultContextBytes). Measured on 2 x H200 (torch 2.11,
/// NCCL from its wheel; bench/calibration/dist_x2_h200.jsonl): device used
/// minus reserved was 1,668,153,344 to 1,691,222,016 bytes over the 8 rank
/// rows (DDP and FSDP2, fp32 and amp_bf16), mean 1,679,687,680; minus the
/// 767 MiB context that leaves 875,429,888 bytes. Not measured at other world
/// sizes (ring and tree channels keep per-peer buffers for two neighbours, so
/// it is assumed constant).
constexpr int64_t kNcclDeviceBytes = 875429888;

/// DDP's defaults (torch/nn/parallel/distributed.py): bucket_cap_mb 25, the
/// first bucket 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES), 250 MiB broadcast
/// chunks when the constructor syncs module states.
constexpr int64_t kDdpBucketCapBytes = 25LL << 20;
constexpr int64_t kDdpFirstBucketBytes = 1LL << 20;
constexpr int64_t kDdpBroadcastChunkBytes = 250LL << 20;
/// DeepSpeed ZeRO's reduce_bucket_size default, in elements.
constexpr int64_t kZeroReduceBucketElements = 500000000;

/// Checks the combination of data-parallel options (world size at least 1;
/// single only with one rank; several ranks need a strategy; FSDP options
/// only with fsdp or zero3; training only). Messages name the flag.
[[nodiscard]] Status CheckDistOptions(const DistOptions& d, Mode mode);

/// The FSDP units of `g`: the modules `d.fsdp_units` names (resolved like
/// --checkpoint), or the repeated blocks when it is empty, in execution
/// order; the root is not listed. An error names what matched nothing.
[[nodiscard]] Result<std::vector<std::string>> FsdpUnits(const Graph& g, const DistOptions& d);

/// DDP's buckets for parameters of these sizes (bytes, registration order):
/// the byte size of each flat bucket, in the order the reducer makes them.
[[nodiscard]] std::vector<int64_t> DdpBucketSizes(const std::vector<int64_t>& param_bytes);

/// Bytes of one rank's padded shard of a tensor of `dims` and `bytes` over
/// `world` ranks: ceil(dim0 / world) rows.
[[nodiscard]] int64_t ShardBytes(const std::vector<int64_t>& dims, int64_t bytes, int64_t world);

/// Rewrites `plan` (a single-process training plan of `g` made with
/// keep_events, options.dist set) into the plan of one rank: peaks,
/// breakdown, timeline, Plan::rank. Module peaks are dropped (they were per
/// process).
[[nodiscard]] Status ApplyDataParallel(const Graph& g, Plan* plan);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_DISTRIBUTED_H_
