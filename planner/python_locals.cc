#include "planner/python_locals.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "planner/ops/op_names.h"

namespace memplan {
namespace {

// A run of ops in one frame at one line.
struct Execution {
  int first = 0;
  int last = 0;
  int frame = -1;  // Graph::frames index (its line and statement)
};

}  // namespace

void MarkPythonLocals(const Graph& g, Schedule* s) {
  const bool traced_regions = std::any_of(g.nodes.begin(), g.nodes.end(),
                                          [](const Node& node) { return !node.fx_region.empty(); });
  if (g.stacks.empty() && !traced_regions) return;
  const int n = static_cast<int>(s->ops.size());
  // Each op's node: its own (or the one whose processing made it), else
  // the next op's (casts and copies run for the op after them).
  std::vector<int> node_of(n, -1);
  {
    int next = -1;
    for (int i = n - 1; i >= 0; --i) {
      const ExecOp& op = s->ops[i];
      const int node = op.scope_node >= 0 ? op.scope_node : op.node;
      if (node >= 0) next = node;
      node_of[i] = next;
    }
  }
  // Each op's stack: its node's, else the previous op's (the nodes the
  // exporter adds to lower one PyTorch op carry no metadata).
  std::vector<int> stack_of(n, -1);
  std::vector<int> node_of_stack(n, -1);  // the node whose stack it is (its modules)
  {
    int prev = -1, prev_node = -1;
    for (int i = 0; i < n; ++i) {
      const int node = node_of[i];
      const int st = node >= 0 ? g.nodes[node].stack : -1;
      if (st >= 0 && st < static_cast<int>(g.stacks.size()) &&
          g.stacks[st].size() == g.nodes[node].modules.size() + 1) {
        prev = g.nodes[node].stack;
        prev_node = node;
      }
      stack_of[i] = prev;
      node_of_stack[i] = prev_node;
    }
  }
  // The last op reading each value (n: a graph output, read after the
  // forward).
  std::vector<int> last_read(s->vals.size(), -1);
  std::vector<int> producer(s->vals.size(), -1);
  for (int i = 0; i < n; ++i) {
    for (int v : s->ops[i].in) {
      if (v >= 0) last_read[v] = std::max(last_read[v], i);
    }
    for (int v : s->ops[i].out) {
      if (v >= 0 && producer[v] < 0) producer[v] = i;
    }
  }
  for (int o : g.outputs) {
    if (o >= 0 && o < static_cast<int>(last_read.size())) last_read[o] = n;
  }
  auto bindable = [&](int v) {
    const Val& val = s->vals[v];
    return !val.is_param && !val.is_buffer && !val.phantom && producer[v] >= 0;
  };
  auto hold = [&](int v, int until) {
    Val& val = s->vals[v];
    if (until <= val.held_until) return;
    val.held_until = until;
    val.held_by_local = true;
  };
  // A region the exporter traced into a subgraph of its own (a module's
  // forward under torch.no_grad() or with autocast off, run through a
  // higher-order op): its stack is one frame of FX-generated code
  // (`<eval_with_key>.N`), whose lines are the graph's, not the module's, so
  // its Python locals are unknown. A value the region reads twice is held
  // until the region ends, as a local of the function it ran
  // (transformers' LlamaRotaryEmbedding.forward keeps `emb` until it
  // returns: the H100 trace of llama_gqa_g amp_bf16 b1 frees it after the
  // sine's scaling, where FX's code frees it after the sine).
  {
    auto fx_file = [&](int i) -> const std::string* {
      const int node = i < n ? node_of[i] : -1;
      if (node < 0 || node != s->ops[i].node || g.nodes[node].fx_region.empty()) return nullptr;
      return &g.nodes[node].fx_region;
    };
    int i = 0;
    while (i < n) {
      const std::string* file = fx_file(i);
      if (file == nullptr) {
        ++i;
        continue;
      }
      // The region: ops of this file, and ops without a node of their own
      // between them (casts and copies made for them). Each value the region
      // makes and reads again as a local is held until the region ends.
      int last = i;
      for (int j = i + 1; j < n; ++j) {
        const std::string* f = fx_file(j);
        if (f != nullptr && *f == *file) {
          last = j;
        } else if (f != nullptr || s->ops[j].node >= 0) {
          break;
        }
      }
      // A value two ops of the region read is a name's (an expression's
      // temporary feeds one op): `emb` feeds the cosine and the sine.
      std::map<int, int> readers;
      for (int k = i; k <= last; ++k) {
        std::vector<int> in = s->ops[k].in;
        std::sort(in.begin(), in.end());
        in.erase(std::unique(in.begin(), in.end()), in.end());
        for (int v : in) {
          if (v >= 0 && producer[v] >= i && producer[v] <= last) ++readers[v];
        }
      }
      for (const auto& [v, count] : readers) {
        if (count >= 2 && bindable(v) && last_read[v] <= last) hold(v, last);
      }
      i = last + 1;
    }
  }
  // What an execution binds: the values its ops made that later ops read,
  // in the order they were made.
  auto results = [&](const Execution& e) {
    std::vector<int> out;
    for (int i = e.first; i <= e.last; ++i) {
      for (int v : s->ops[i].out) {
        if (v >= 0 && producer[v] == i && last_read[v] > e.last && bindable(v)) out.push_back(v);
      }
    }
    return out;
  };
  // Where a later execution of the frame (from k on) binds `name` again:
  // its end, or the frame's return.
  auto bound_again = [&](const std::vector<Execution>& ex, size_t k, const std::string& name,
                         int frame_last) {
    for (size_t m = k; m < ex.size(); ++m) {
      const PyStatement& later = g.frames[ex[m].frame].statement;
      if (later.kind != PyStatement::Kind::kAssign) continue;
      for (const auto& l : later.targets) {
        if (std::find(l.begin(), l.end(), name) != l.end()) return ex[m].last;
      }
    }
    return frame_last;
  };
  // A frame invocation's executions, bound when it returns (its last op);
  // `depth` is the frame's place in the stacks.
  auto close_frame = [&](const std::vector<Execution>& ex, int frame_last, int depth) {
    for (size_t k = 0; k < ex.size(); ++k) {
      const PyStatement& st = g.frames[ex[k].frame].statement;
      // `torch.cat(feats, 1)`: the list or tuple `feats` names holds every
      // tensor the cat joins (`feats.append(x)`, `feats += (x,)` run no op)
      // until the name is bound again or the frame returns.
      for (const std::string& name : st.joined) {
        const int until = bound_again(ex, k, name, frame_last);
        if (until <= ex[k].last) continue;
        for (int i = ex[k].first; i <= ex[k].last; ++i) {
          const ExecOp& op = s->ops[i];
          if (op.node < 0 || op.node != node_of[i] || g.nodes[op.node].op_type != op_names::kConcat)
            continue;
          const int st_i = stack_of[i];
          if (st_i < 0 || static_cast<int>(g.stacks[st_i].size()) != depth + 1 ||
              g.stacks[st_i][depth] != ex[k].frame) {
            continue;  // a cat of a function the line calls
          }
          for (int v : op.in) {
            if (v >= 0 && bindable(v)) hold(v, until);
          }
        }
      }
      if (st.kind != PyStatement::Kind::kAssign) continue;
      const std::vector<int> vals = results(ex[k]);
      if (vals.empty()) continue;
      // Where each name is bound again: the end of that execution, or the
      // frame's return.
      std::map<std::string, int> rebound;
      for (const auto& list : st.targets) {
        for (const std::string& name : list) {
          if (name.empty() || rebound.count(name)) continue;
          int until = frame_last;
          for (size_t m = k + 1; m < ex.size() && until == frame_last; ++m) {
            const PyStatement& later = g.frames[ex[m].frame].statement;
            if (later.kind != PyStatement::Kind::kAssign) continue;
            for (const auto& l : later.targets) {
              if (std::find(l.begin(), l.end(), name) != l.end()) until = ex[m].last;
            }
          }
          rebound[name] = until;
        }
      }
      // A value lives while some target list's name refers to it.
      std::vector<int> until(vals.size(), -1);
      for (const auto& list : st.targets) {
        auto of = [&](const std::string& name) { return name.empty() ? -1 : rebound[name]; };
        if (list.size() == 1 || list.size() == vals.size()) {
          for (size_t j = 0; j < vals.size(); ++j) {
            until[j] = std::max(until[j], of(list.size() == 1 ? list[0] : list[j]));
          }
        } else {
          // Which value went to which name is not known: each to the name
          // bound again first (a name that is no plain one keeps nothing).
          int first = std::numeric_limits<int>::max();
          for (const std::string& name : list) first = std::min(first, of(name));
          for (size_t j = 0; j < vals.size(); ++j) until[j] = std::max(until[j], first);
        }
      }
      for (size_t j = 0; j < vals.size(); ++j) {
        if (until[j] > ex[k].last) hold(vals[j], until[j]);
      }
    }
  };
  // Open frame invocations, outermost first: their executions so far.
  std::vector<std::vector<Execution>> open;
  auto depth_of = [&](int i) {
    return stack_of[i] < 0 ? 0 : static_cast<int>(g.stacks[stack_of[i]].size());
  };
  // Frame d of op i is the invocation of op i - 1's frame d: the callers ran
  // the same lines, and the frame is the same module's forward.
  auto same_invocation = [&](int a, int b, int d) {
    const std::vector<int>& sa = g.stacks[stack_of[a]];
    const std::vector<int>& sb = g.stacks[stack_of[b]];
    const SourceFrame& fa = g.frames[sa[d]];
    const SourceFrame& fb = g.frames[sb[d]];
    if (fa.file != fb.file || fa.function != fb.function) return false;
    if (d > 0 &&
        g.nodes[node_of_stack[a]].modules[d - 1] != g.nodes[node_of_stack[b]].modules[d - 1]) {
      return false;
    }
    return true;
  };
  for (int i = 0; i <= n; ++i) {
    const int depth = i < n ? depth_of(i) : 0;
    // How many of the open invocations op i continues.
    int keep = 0;
    if (i > 0 && i < n && stack_of[i] >= 0 && stack_of[i - 1] >= 0) {
      const std::vector<int>& sa = g.stacks[stack_of[i - 1]];
      const std::vector<int>& sb = g.stacks[stack_of[i]];
      const int common = std::min(static_cast<int>(open.size()), depth);
      while (keep < common && same_invocation(i - 1, i, keep)) {
        if (sa[keep] != sb[keep]) {  // a new line in that frame: callees return
          ++keep;
          break;
        }
        ++keep;
      }
    }
    while (static_cast<int>(open.size()) > keep) {
      close_frame(open.back(), i - 1, static_cast<int>(open.size()) - 1);
      open.pop_back();
    }
    if (i == n || stack_of[i] < 0) continue;
    const std::vector<int>& st = g.stacks[stack_of[i]];
    for (int d = 0; d < depth; ++d) {
      if (d >= static_cast<int>(open.size())) open.emplace_back();
      std::vector<Execution>& ex = open[d];
      if (!ex.empty() && ex.back().frame == st[d] && ex.back().last == i - 1) {
        ex.back().last = i;
      } else {
        ex.push_back({i, i, st[d]});
      }
    }
  }
}

}  // namespace memplan
