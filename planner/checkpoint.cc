#include "planner/checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "planner/checked.h"
#include "planner/op_registry.h"
#include "planner/shape_inference.h"
#include "planner/text.h"

namespace memplan {
namespace {

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    out.push_back(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

bool Numbered(const std::string& c) {
  return !c.empty() && std::isdigit(static_cast<unsigned char>(c.back()));
}

// "layer3" -> "layer#", "0" -> "#", "ln_1" -> "ln_#".
std::string Wild(const std::string& c) {
  size_t end = c.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(c[end - 1]))) --end;
  return c.substr(0, end) + "#";
}

struct Member {
  int first = -1;
  int last = -1;
  int ops = 0;
};

bool Better(const BlockChain& a, const BlockChain& b) {
  if (a.covered_ops != b.covered_ops) return a.covered_ops > b.covered_ops;
  if (a.blocks.size() != b.blocks.size()) return a.blocks.size() > b.blocks.size();
  if (a.pattern.size() != b.pattern.size()) return a.pattern.size() < b.pattern.size();
  return a.pattern < b.pattern;
}

}  // namespace

bool InModule(const std::string& scope, const std::string& module) {
  if (scope.size() < module.size() || scope.compare(0, module.size(), module) != 0) return false;
  return scope.size() == module.size() || scope[module.size()] == '.';
}

std::vector<std::string> ModulePaths(const Graph& g) {
  std::vector<int> order;
  auto topo = TopologicalOrder(g);
  if (topo.ok()) {
    order = topo.value();
  } else {
    for (size_t i = 0; i < g.nodes.size(); ++i) order.push_back(static_cast<int>(i));
  }
  std::vector<std::string> paths;
  std::set<std::string> seen;
  for (int ni : order) {
    const std::string& scope = g.nodes[ni].scope;
    if (scope.empty()) continue;
    size_t dot = 0;
    while (true) {
      dot = scope.find('.', dot);
      const std::string prefix = dot == std::string::npos ? scope : scope.substr(0, dot);
      if (!prefix.empty() && seen.insert(prefix).second) paths.push_back(prefix);
      if (dot == std::string::npos) break;
      ++dot;
    }
  }
  return paths;
}

namespace {

// Whether `pattern` is `path` or a dotted suffix of it.
bool NamesModule(const std::string& path, const std::string& pattern) {
  if (path == pattern) return true;
  return path.size() > pattern.size() &&
         path.compare(path.size() - pattern.size(), pattern.size(), pattern) == 0 &&
         path[path.size() - pattern.size() - 1] == '.';
}

// The modules closest to `pattern` (by the best of the path and its dotted
// suffixes), at most `n`.
std::vector<std::string> CloseMatches(const std::vector<std::string>& paths,
                                      const std::string& pattern, size_t n) {
  std::vector<std::pair<size_t, size_t>> scored;  // (distance, index)
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& p = paths[i];
    size_t best = EditDistance(p, pattern);
    for (size_t dot = p.find('.'); dot != std::string::npos; dot = p.find('.', dot + 1)) {
      best = std::min(best, EditDistance(p.substr(dot + 1), pattern));
    }
    scored.emplace_back(best, i);
  }
  std::stable_sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  const size_t limit = std::max<size_t>(2, pattern.size() / 2);
  for (const auto& s : scored) {
    if (out.size() >= n || s.first > limit) break;
    out.push_back(paths[s.second]);
  }
  return out;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

}  // namespace

Result<std::vector<std::string>> ResolveCheckpointModules(
    const Graph& g, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return std::vector<std::string>{};
  const std::vector<std::string> paths = ModulePaths(g);
  std::set<size_t> chosen;  // indices into paths (execution order)
  for (const std::string& pattern : patterns) {
    std::vector<size_t> hits;
    for (size_t i = 0; i < paths.size(); ++i) {
      if (paths[i] == pattern) {
        hits = {i};
        break;
      }
      if (NamesModule(paths[i], pattern)) hits.push_back(i);
    }
    const std::string where = g.source + ": --checkpoint " + pattern + ": ";
    if (hits.empty()) {
      if (paths.empty()) {
        return Status::Error(where + "the model records no module names (nothing to checkpoint)");
      }
      const std::vector<std::string> close = CloseMatches(paths, pattern, 5);
      return Status::Error(
          where + "matches no module" +
          (close.empty() ? std::string() : "; close matches: " + JoinNames(close)) +
          " (memplan inspect lists the modules)");
    }
    if (hits.size() > 1) {
      std::vector<std::string> names;
      for (size_t k = 0; k < hits.size() && k < 5; ++k) names.push_back(paths[hits[k]]);
      return Status::Error(where + "names " + std::to_string(hits.size()) + " modules (" +
                           JoinNames(names) + (hits.size() > 5 ? ", ..." : "") +
                           "): give a longer path");
    }
    chosen.insert(hits[0]);
  }
  std::vector<std::string> out;
  for (size_t i : chosen) {
    bool nested = false;
    for (size_t j : chosen) {
      if (j != i && InModule(paths[i], paths[j])) nested = true;
    }
    if (!nested) out.push_back(paths[i]);
  }
  return out;
}

std::vector<BlockChain> FindBlockFamilies(const Graph& g) {
  std::vector<int> order;
  auto topo = TopologicalOrder(g);
  if (topo.ok()) {
    order = topo.value();
  } else {
    for (size_t i = 0; i < g.nodes.size(); ++i) order.push_back(static_cast<int>(i));
  }
  std::map<std::string, std::map<std::string, Member>> families;  // pattern -> member
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const std::string& scope = g.nodes[order[pos]].scope;
    if (scope.empty()) continue;
    const std::vector<std::string> parts = Split(scope);
    std::string member, pattern;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) {
        member += '.';
        pattern += '.';
      }
      member += parts[i];
      pattern += Numbered(parts[i]) ? Wild(parts[i]) : parts[i];
      if (!Numbered(parts[i])) continue;
      Member& m = families[pattern][member];
      if (m.first < 0) m.first = static_cast<int>(pos);
      m.last = static_cast<int>(pos);
      ++m.ops;
    }
  }
  std::vector<BlockChain> out;
  for (const auto& f : families) {
    if (f.second.size() < 2) continue;
    BlockChain c;
    c.pattern = f.first;
    c.total_ops = static_cast<int>(order.size());
    for (const auto& m : f.second) {
      c.blocks.push_back({m.first, m.second.first, m.second.last, m.second.ops});
      c.covered_ops += m.second.ops;
    }
    std::sort(c.blocks.begin(), c.blocks.end(),
              [](const Block& a, const Block& b) { return a.first < b.first; });
    bool disjoint = true;
    for (size_t i = 1; i < c.blocks.size(); ++i) {
      if (c.blocks[i].first <= c.blocks[i - 1].last) disjoint = false;
    }
    if (disjoint) out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), Better);
  return out;
}

BlockChain FindBlocks(const Graph& g) {
  std::vector<BlockChain> all = FindBlockFamilies(g);
  if (all.empty()) {
    BlockChain none;
    none.total_ops = static_cast<int>(g.nodes.size());
    return none;
  }
  return all.front();
}

const char* StrategyName(CheckpointStrategy p) {
  switch (p) {
    case CheckpointStrategy::kNone:
      return "none";
    case CheckpointStrategy::kSqrt:
      return "sqrt";
    case CheckpointStrategy::kAll:
      return "all";
    case CheckpointStrategy::kOptimal:
      return "optimal";
  }
  return "?";
}

std::vector<std::string> FixedPlacement(const BlockChain& chain, CheckpointStrategy p) {
  std::vector<std::string> out;
  const size_t n = chain.blocks.size();
  if (p == CheckpointStrategy::kAll) {
    for (const Block& b : chain.blocks) out.push_back(b.module);
  } else if (p == CheckpointStrategy::kSqrt && n >= 2) {
    const size_t k = std::max<size_t>(2, static_cast<size_t>(std::lround(std::sqrt(n))));
    for (size_t i = 0; i < n; ++i) {
      if ((i + 1) % k != 0) out.push_back(chain.blocks[i].module);
    }
  }
  return out;
}

std::vector<BlockCost> EstimateBlockCosts(const Graph& g, const BlockChain& chain) {
  std::vector<BlockCost> costs(chain.blocks.size());
  if (chain.blocks.empty()) return costs;
  for (const Node& node : g.nodes) {
    if (node.scope.empty()) continue;
    int which = -1;
    for (size_t i = 0; i < chain.blocks.size(); ++i) {
      if (InModule(node.scope, chain.blocks[i].module)) {
        which = static_cast<int>(i);
        break;
      }
    }
    if (which < 0) continue;
    const OpDef* def = FindOp(node.domain, node.op_type);
    if (def == nullptr || !def->differentiable) continue;
    int64_t out_elems = 0;
    for (int t : node.outputs) {
      if (t < 0) continue;
      const Tensor& tensor = g.tensors[t];
      if (!tensor.shape_known) continue;
      int64_t numel = 0, bytes = 0;
      if (!CheckedNumel(tensor.shape, &numel)) continue;
      out_elems += numel;
      if (def->alias == Alias::kNone && DTypeBytes(tensor.dtype, numel, &bytes)) {
        costs[which].bytes += bytes;
      }
    }
    costs[which].flops += def->flops != nullptr ? def->flops(g, node) : out_elems;
  }
  return costs;
}

bool CheapestCover(const std::vector<BlockCost>& costs, int64_t need, std::vector<int>* chosen) {
  chosen->clear();
  if (need <= 0) return true;
  int64_t total = 0;
  for (const BlockCost& c : costs) total += std::max<int64_t>(0, c.bytes);
  if (total < need) return false;
  // Units of total/4096 bytes; a block's bytes round down, the need rounds up.
  const double unit = std::max(1.0, static_cast<double>(total) / 4096.0);
  const int target = static_cast<int>(std::ceil(static_cast<double>(need) / unit));
  const size_t n = costs.size();
  std::vector<int> w(n);
  for (size_t i = 0; i < n; ++i) {
    w[i] = static_cast<int>(
        std::floor(static_cast<double>(std::max<int64_t>(0, costs[i].bytes)) / unit));
  }
  // best[i][j]: least flops using blocks < i that cover >= j units (capped).
  const double kInf = 1e300;
  std::vector<std::vector<double>> best(n + 1, std::vector<double>(target + 1, kInf));
  best[0][0] = 0;
  for (size_t i = 0; i < n; ++i) {
    for (int j = 0; j <= target; ++j) {
      if (best[i][j] >= kInf) continue;
      best[i + 1][j] = std::min(best[i + 1][j], best[i][j]);
      const int k = std::min(target, j + w[i]);
      best[i + 1][k] = std::min(best[i + 1][k], best[i][j] + static_cast<double>(costs[i].flops));
    }
  }
  if (best[n][target] >= kInf) {
    // Rounding lost the cover (tiny blocks): take every block.
    for (size_t i = 0; i < n; ++i) chosen->push_back(static_cast<int>(i));
    return true;
  }
  int j = target;
  for (size_t i = n; i > 0; --i) {
    if (best[i - 1][j] == best[i][j]) continue;  // Block i-1 not taken.
    // Taken: find the j' it came from.
    for (int jp = 0; jp <= target; ++jp) {
      if (best[i - 1][jp] < kInf && std::min(target, jp + w[i - 1]) == j &&
          best[i - 1][jp] + static_cast<double>(costs[i - 1].flops) == best[i][j]) {
        chosen->push_back(static_cast<int>(i - 1));
        j = jp;
        break;
      }
    }
  }
  std::reverse(chosen->begin(), chosen->end());
  return true;
}

}  // namespace memplan
