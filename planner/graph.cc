#include "planner/graph.h"

#include <algorithm>
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

size_t Graph::SlotOf(const std::string& n, size_t hash) const {
  const size_t mask = name_slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const int id = name_slots_[i];
    if (id < 0 || tensors[id].name == n) return i;
  }
}

void Graph::GrowIndex() {
  // At most half full: probes stay short.
  std::vector<int> old(std::max<size_t>(16, name_slots_.size() * 2), -1);
  old.swap(name_slots_);
  for (int id : old) {
    if (id >= 0)
      name_slots_[SlotOf(tensors[id].name, std::hash<std::string>()(tensors[id].name))] = id;
  }
}

int Graph::Find(const std::string& n) const {
  if (name_slots_.empty()) return -1;
  return name_slots_[SlotOf(n, std::hash<std::string>()(n))];
}

int Graph::FindOrAdd(const std::string& n) {
  if (2 * (indexed_ + 1) > name_slots_.size()) GrowIndex();
  const size_t slot = SlotOf(n, std::hash<std::string>()(n));
  if (name_slots_[slot] >= 0) return name_slots_[slot];
  const int id = static_cast<int>(tensors.size());
  tensors.emplace_back();
  tensors.back().name = n;
  name_slots_[slot] = id;
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
