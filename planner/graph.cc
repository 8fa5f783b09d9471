#include "planner/graph.h"

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

int Graph::Find(const std::string& n) const {
  auto it = by_name_.find(n);
  return it == by_name_.end() ? -1 : it->second;
}

int Graph::FindOrAdd(const std::string& n) {
  auto it = by_name_.find(n);
  if (it != by_name_.end()) return it->second;
  int id = static_cast<int>(tensors.size());
  tensors.emplace_back();
  tensors.back().name = n;
  by_name_[n] = id;
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
