#include "planner/graph.h"

#include <algorithm>
#include <cstdint>
#include <functional>

namespace memplan {

int64_t Node::GetInt(const std::string& attr, int64_t def) const {
  auto it = attrs.find(attr);
  return it == attrs.end() ? def : it->second.i;
}

float Node::GetFloat(const std::string& attr, float def) const {
  auto it = attrs.find(attr);
  return it == attrs.end() ? def : it->second.f;
}

std::string Node::GetString(const std::string& attr, const std::string& def) const {
  auto it = attrs.find(attr);
  return it == attrs.end() ? def : it->second.s;
}

std::vector<int64_t> Node::GetInts(const std::string& attr) const {
  auto it = attrs.find(attr);
  return it == attrs.end() ? std::vector<int64_t>{} : it->second.ints;
}

std::string Node::Label(int index) const {
  if (!name.empty()) return name;
  return op_type + "#" + std::to_string(index);
}

// name_slots_ holds pairs: slot k is (id, 32 bits of the name's hash) at
// [2k, 2k + 1]. A probe compares the hash bits before touching the tensor's
// name (another cache line), and growing rehashes from the stored bits.
namespace {

uint32_t HashBits(size_t hash) { return static_cast<uint32_t>(hash ^ (hash >> 32)); }

}  // namespace

size_t Graph::SlotOf(const std::string& n, size_t hash) const {
  const size_t mask = name_slots_.size() / 2 - 1;
  const uint32_t bits = HashBits(hash);
  for (size_t i = bits & mask;; i = (i + 1) & mask) {
    const int id = name_slots_[2 * i];
    if (id < 0) return i;
    if (static_cast<uint32_t>(name_slots_[2 * i + 1]) == bits && tensors[id].name == n) return i;
  }
}

void Graph::GrowIndex() {
  // At most half full: probes stay short.
  const size_t slots = std::max<size_t>(16, name_slots_.size());  // twice the old slot count
  std::vector<int> old(2 * slots, -1);
  old.swap(name_slots_);
  const size_t mask = slots - 1;
  for (size_t k = 0; k < old.size(); k += 2) {
    if (old[k] < 0) continue;
    size_t i = static_cast<uint32_t>(old[k + 1]) & mask;
    while (name_slots_[2 * i] >= 0) i = (i + 1) & mask;
    name_slots_[2 * i] = old[k];
    name_slots_[2 * i + 1] = old[k + 1];
  }
}

int Graph::Find(const std::string& n) const {
  if (name_slots_.empty()) return -1;
  return name_slots_[2 * SlotOf(n, std::hash<std::string>()(n))];
}

int Graph::FindOrAdd(const std::string& n) {
  if (4 * (indexed_ + 1) > name_slots_.size()) GrowIndex();
  const size_t hash = std::hash<std::string>()(n);
  const size_t slot = SlotOf(n, hash);
  if (name_slots_[2 * slot] >= 0) return name_slots_[2 * slot];
  const int id = static_cast<int>(tensors.size());
  tensors.emplace_back();
  tensors.back().name = n;
  name_slots_[2 * slot] = id;
  name_slots_[2 * slot + 1] = static_cast<int>(HashBits(hash));
  ++indexed_;
  return id;
}

int64_t Graph::Opset() const {
  auto it = opsets.find("");
  if (it != opsets.end()) return it->second;
  it = opsets.find("ai.onnx");
  return it == opsets.end() ? 0 : it->second;
}

void Graph::Link() {
  for (Tensor& t : tensors) {
    t.producer = -1;
    t.consumers.clear();
  }
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    for (int in : nodes[i].inputs) {
      if (in >= 0) tensors[in].consumers.push_back(i);
    }
    for (int out : nodes[i].outputs) {
      if (out >= 0) tensors[out].producer = i;
    }
  }
}

}  // namespace memplan
