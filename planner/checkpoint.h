#ifndef MEMPLAN_PLANNER_CHECKPOINT_H_
#define MEMPLAN_PLANNER_CHECKPOINT_H_

// Activation checkpointing: where it can go and where it should.
//
// Cut points are module boundaries. The candidates are the repeated sibling
// modules of the model, found from Node::scope: "m.transformer.h.0" ..
// "m.transformer.h.11", "layer1.0" .. "layer4.2", "features.N". A module
// named in PlanOptions::checkpoint_segments keeps only the tensors entering it
// during forward and is recomputed in backward (torch.utils.checkpoint,
// use_reentrant=False); the planner's simulator does the accounting.
//
// Placements offered (see FixedPlacement()):
//   none     nothing recomputed.
//   sqrt     every block except every k-th, k = round(sqrt(n)): a (1 - 1/k)
//            share of the blocks' activations goes and the same share of their
//            forward is recomputed. Chen et al. 2016 ("Training deep nets with
//            sublinear memory cost") instead group k consecutive blocks into one
//            segment and keep only the segment inputs; a segment here is one
//            module, so a group of blocks cannot be named, and per-block
//            segments already keep only n boundary tensors, which for the block
//            counts of real models (12..50) is far less than one block's
//            internals. The k-th blocks are the last of each group of k.
//   all      every block (what Hugging Face's gradient_checkpointing_enable does).
//   optimal  the cheapest set for a budget: CheapestCover() on per-block costs
//            (the advisor calibrates them and verifies the result with a full
//            plan).

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/status.h"

namespace memplan {

/// One repeated module: a candidate checkpoint segment.
struct Block {
  std::string module;  ///< "m.transformer.h.3".
  int first = 0;       ///< Position of its first op in topological order.
  int last = 0;        ///< Position of its last op.
  int ops = 0;         ///< Ops whose scope is the module or inside it.
};

/// A family of repeated sibling modules, in execution order.
struct BlockChain {
  std::string pattern;  ///< The module path with numbers as '#': "layer#.#".
  std::vector<Block> blocks;
  int covered_ops = 0;  ///< Ops inside the blocks.
  int total_ops = 0;    ///< Ops of the graph.
};

/// Every family of numbered sibling modules (>= 2 members whose op ranges do
/// not overlap), best first: most ops covered, then most members, then the
/// shorter pattern. A component is numbered when it ends in digits ("3",
/// "layer3", "encoder_layer_3"); numbered components of the parent path are
/// wildcards too, so "layer1.0" .. "layer4.2" are one family of 16.
std::vector<BlockChain> FindBlockFamilies(const Graph& g);

/// The best family, or an empty chain when the model has none.
BlockChain FindBlocks(const Graph& g);

/// Whether a node of scope `scope` belongs to module `module`.
bool InModule(const std::string& scope, const std::string& module);

/// Every module path of the graph (each dotted prefix of a node scope), in
/// the order their first op runs.
std::vector<std::string> ModulePaths(const Graph& g);

/// The modules that `patterns` (--checkpoint) name, as one well-defined set:
/// a pattern is a module's full path ("m.transformer.h.0") or a dotted suffix
/// of it ("transformer.h.0": the name in the user's own code, without the
/// export wrapper's prefix) that only one module has. A module inside another
/// named one is part of that one's recompute and is dropped; the result is in
/// execution order, whatever the order of the patterns. A pattern that names
/// no module, or several, is an error listing the close matches.
Result<std::vector<std::string>> ResolveCheckpointModules(const Graph& g,
                                                          const std::vector<std::string>& patterns);

enum class CheckpointStrategy { kNone, kSqrt, kAll, kOptimal };
const char* StrategyName(CheckpointStrategy p);

/// Modules to checkpoint for the fixed placements (kNone, kSqrt, kAll).
std::vector<std::string> FixedPlacement(const BlockChain& chain, CheckpointStrategy p);

/// What checkpointing one block saves and costs.
struct BlockCost {
  int64_t bytes = 0;  ///< Memory it frees at the peak (>= 0).
  int64_t flops = 0;  ///< Forward FLOPs recomputed in backward.
};

/// Per-block proxies from a graph with shapes: bytes = the outputs of the
/// block's differentiable, non-view ops (what autograd tends to keep), flops =
/// the block's forward FLOPs from the op rules.
std::vector<BlockCost> EstimateBlockCosts(const Graph& g, const BlockChain& chain);

/// The set of blocks with the least total flops whose bytes add up to at
/// least `need` (a 0/1 knapsack by dynamic programming over the chain, bytes
/// rounded down to 1/4096 of the total so the cover is never overstated).
/// Ascending indices; empty when need <= 0; false when even all blocks fall
/// short.
bool CheapestCover(const std::vector<BlockCost>& costs, int64_t need, std::vector<int>* chosen);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_CHECKPOINT_H_
