#include "planner/module_calls.h"

#include <algorithm>
#include <string>
#include <vector>

namespace memplan {

void MarkModuleArguments(const Graph& g, Schedule* s) {
  const int n = static_cast<int>(s->ops.size());
  // The graph node whose modules an op runs in: synthetic ops (casts,
  // copies) and nodes the exporter left without module information run
  // inside the op after them.
  std::vector<int> node_of(n, -1);
  int next = -1;
  for (int i = n - 1; i >= 0; --i) {
    const int node = s->ops[i].node;
    if (node >= 0 && g.nodes[node].modules_known) next = node;
    node_of[i] = next;
  }
  std::vector<int> producer(s->vals.size(), -1);
  for (int i = 0; i < n; ++i) {
    for (int v : s->ops[i].out) {
      if (v >= 0) producer[v] = i;
    }
  }
  static const std::vector<std::string> kNone;
  auto modules_of = [&](int i) -> const std::vector<std::string>& {
    return node_of[i] >= 0 ? g.nodes[node_of[i]].modules : kNone;
  };
  // Every tensor an op of [start, end] reads that was made before start is
  // an argument of the call (or captured by it): held to the call's end.
  auto close = [&](int start, int end) {
    for (int j = start; j <= end; ++j) {
      for (int v : s->ops[j].in) {
        if (v < 0 || producer[v] >= start) continue;
        Val& val = s->vals[v];
        if (val.is_param || val.is_buffer) continue;
        val.held_until = std::max(val.held_until, end);
      }
    }
  };
  std::vector<std::pair<std::string, int>> open;  // module, first op
  for (int i = 0; i <= n; ++i) {
    const std::vector<std::string>& mods = i < n ? modules_of(i) : kNone;
    size_t common = 0;
    while (common < open.size() && common < mods.size() && open[common].first == mods[common]) {
      ++common;
    }
    while (open.size() > common) {
      close(open.back().second, i - 1);
      open.pop_back();
    }
    for (size_t k = common; k < mods.size(); ++k) open.emplace_back(mods[k], i);
  }
}

}  // namespace memplan
