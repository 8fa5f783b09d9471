#include "planner/checkpoint.h"

#include <gtest/gtest.h>

#include "planner/ops/test_graph.h"

namespace memplan {
namespace {

using testing_util::GraphBuilder;
using testing_util::S;

// A chain of Relu ops, one per scope, in order.
Graph Chain(const std::vector<std::string>& scopes) {
  GraphBuilder b;
  b.Input("x", {S("batch"), testing_util::D(4)});
  std::string prev = "x";
  for (size_t i = 0; i < scopes.size(); ++i) {
    const std::string out = "t" + std::to_string(i);
    b.Op("Relu", {prev}, {out}).scope = scopes[i];
    prev = out;
  }
  b.Output(prev);
  b.g.Link();
  return b.g;
}

std::vector<std::string> Modules(const BlockChain& c) {
  std::vector<std::string> out;
  for (const Block& b : c.blocks) out.push_back(b.module);
  return out;
}

TEST(Checkpoint, InModuleNeedsADotBoundary) {
  EXPECT_TRUE(InModule("m.h.1", "m.h.1"));
  EXPECT_TRUE(InModule("m.h.1.attn", "m.h.1"));
  EXPECT_FALSE(InModule("m.h.10", "m.h.1"));
  EXPECT_FALSE(InModule("m.h", "m.h.1"));
}

Graph Gpt2Like() {
  std::vector<std::string> scopes = {"m.transformer.wte"};
  for (int i = 0; i < 3; ++i) {
    const std::string h = "m.transformer.h." + std::to_string(i);
    for (const char* s : {".ln_1", ".attn", ".mlp"}) scopes.push_back(h + s);
  }
  scopes.push_back("m.lm_head");
  return Chain(scopes);
}

TEST(Checkpoint, ModulePathsAreEveryScopePrefixInRunOrder) {
  const std::vector<std::string> p = ModulePaths(Chain({"a.b.c", "a.d", "e"}));
  EXPECT_EQ(p, (std::vector<std::string>{"a", "a.b", "a.b.c", "a.d", "e"}));
}

TEST(Checkpoint, ResolvesTheUsersNamesAndDottedSuffixes) {
  const Graph g = Gpt2Like();
  using V = std::vector<std::string>;
  EXPECT_EQ(ResolveCheckpointModules(g, {"m.transformer.h.1"}).value(), V{"m.transformer.h.1"});
  // The name in the user's code, without the export wrapper's "m.".
  EXPECT_EQ(ResolveCheckpointModules(g, {"transformer.h.1"}).value(), V{"m.transformer.h.1"});
  EXPECT_EQ(ResolveCheckpointModules(g, {"h.1"}).value(), V{"m.transformer.h.1"});
  // Execution order, whatever the order given; duplicates once.
  EXPECT_EQ(ResolveCheckpointModules(g, {"h.2", "h.0", "h.2"}).value(),
            (V{"m.transformer.h.0", "m.transformer.h.2"}));
  // Overlapping: the outer module covers the inner one, in either order.
  EXPECT_EQ(ResolveCheckpointModules(g, {"h.1", "h.1.attn"}).value(), V{"m.transformer.h.1"});
  EXPECT_EQ(ResolveCheckpointModules(g, {"h.1.attn", "h.1"}).value(), V{"m.transformer.h.1"});
  EXPECT_EQ(ResolveCheckpointModules(g, {"transformer", "h.0"}).value(), V{"m.transformer"});
}

TEST(Checkpoint, UnmatchedOrAmbiguousNamesAreErrors) {
  const Graph g = Gpt2Like();
  auto none = ResolveCheckpointModules(g, {"nosuch.module"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.message(),
            "m.onnx: --checkpoint nosuch.module: matches no module (memplan inspect lists the "
            "modules)");
  auto typo = ResolveCheckpointModules(g, {"transfomer.h.1"});
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.message().find("close matches: m.transformer.h.1"), std::string::npos)
      << typo.message();
  auto many = ResolveCheckpointModules(g, {"attn"});
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.message().find("names 3 modules (m.transformer.h.0.attn"), std::string::npos)
      << many.message();
  EXPECT_TRUE(ResolveCheckpointModules(g, {}).value().empty());
}

TEST(Checkpoint, TransformerBlocksAreTheOutermostNumberedFamily) {
  std::vector<std::string> scopes = {"m.wte", "m.wpe"};
  for (int i = 0; i < 3; ++i) {
    const std::string h = "m.h." + std::to_string(i);
    for (const char* s : {".ln_1", ".attn.c_attn", ".attn", ".ln_2", ".mlp.c_fc", ".mlp.act", ""}) {
      scopes.push_back(h + s);
    }
  }
  scopes.push_back("m.ln_f");
  scopes.push_back("");
  BlockChain c = FindBlocks(Chain(scopes));
  EXPECT_EQ(c.pattern, "m.h.#");
  EXPECT_EQ(Modules(c), (std::vector<std::string>{"m.h.0", "m.h.1", "m.h.2"}));
  EXPECT_EQ(c.blocks[1].ops, 7);
  EXPECT_EQ(c.blocks[1].first, 9);
  EXPECT_EQ(c.blocks[1].last, 15);
  EXPECT_EQ(c.covered_ops, 21);
}

TEST(Checkpoint, ResNetStagesAndBlocksFormOneFamily) {
  // layer1.0, layer1.1, layer2.0, layer2.1, layer2.2: numbered parents are wildcards.
  std::vector<std::string> scopes = {"conv1", "bn1", "relu", "maxpool"};
  for (auto [stage, n] : std::vector<std::pair<int, int>>{{1, 2}, {2, 3}}) {
    for (int i = 0; i < n; ++i) {
      const std::string p = "layer" + std::to_string(stage) + "." + std::to_string(i);
      for (const char* s : {".conv1", ".bn1", ".conv2", ".bn2", ".relu"}) scopes.push_back(p + s);
      if (i == 0) scopes.push_back(p + ".downsample.0");
      scopes.push_back(p);  // the residual add
    }
  }
  scopes.push_back("fc");
  BlockChain c = FindBlocks(Chain(scopes));
  EXPECT_EQ(c.pattern, "layer#.#");
  EXPECT_EQ(Modules(c),
            (std::vector<std::string>{"layer1.0", "layer1.1", "layer2.0", "layer2.1", "layer2.2"}));
  // The per-conv family "layer#.#.conv#" is there too, but covers fewer ops.
  auto families = FindBlockFamilies(Chain(scopes));
  ASSERT_GE(families.size(), 3u);
  EXPECT_GT(families[0].covered_ops, families.back().covered_ops);
}

TEST(Checkpoint, TorchvisionNamesWithSuffixNumbers) {
  std::vector<std::string> scopes = {"conv_proj"};
  for (int i = 0; i < 4; ++i) {
    const std::string p = "encoder.layers.encoder_layer_" + std::to_string(i);
    scopes.push_back(p + ".ln_1");
    scopes.push_back(p + ".self_attention");
    scopes.push_back(p + ".mlp.0");
    scopes.push_back(p);
  }
  BlockChain c = FindBlocks(Chain(scopes));
  EXPECT_EQ(c.pattern, "encoder.layers.encoder_layer_#");
  EXPECT_EQ(c.blocks.size(), 4u);
}

TEST(Checkpoint, InterleavedMembersAreNotAChain) {
  // A module called twice around another (weight sharing) overlaps its sibling.
  BlockChain c = FindBlocks(Chain({"b.0", "b.1", "b.0", "b.1"}));
  EXPECT_TRUE(c.blocks.empty());
  EXPECT_TRUE(FindBlocks(Chain({"a", "b", "c"})).blocks.empty());
}

TEST(Checkpoint, FixedPlacements) {
  BlockChain c;
  for (int i = 0; i < 12; ++i) c.blocks.push_back({"h." + std::to_string(i), i, i, 1});
  EXPECT_TRUE(FixedPlacement(c, CheckpointStrategy::kNone).empty());
  EXPECT_EQ(FixedPlacement(c, CheckpointStrategy::kAll).size(), 12u);
  // k = round(sqrt(12)) = 3: every block except h.2, h.5, h.8, h.11.
  EXPECT_EQ(FixedPlacement(c, CheckpointStrategy::kSqrt),
            (std::vector<std::string>{"h.0", "h.1", "h.3", "h.4", "h.6", "h.7", "h.9", "h.10"}));
}

TEST(Checkpoint, CheapestCoverPicksTheBestBytesPerFlop) {
  // Early CNN blocks: many bytes, few FLOPs. Late ones: the reverse.
  std::vector<BlockCost> costs = {{400, 10}, {300, 10}, {100, 40}, {100, 40}, {50, 80}};
  std::vector<int> chosen;
  ASSERT_TRUE(CheapestCover(costs, 650, &chosen));
  EXPECT_EQ(chosen, (std::vector<int>{0, 1}));
  ASSERT_TRUE(CheapestCover(costs, 750, &chosen));
  EXPECT_EQ(chosen, (std::vector<int>{0, 1, 2}));
  ASSERT_TRUE(CheapestCover(costs, 0, &chosen));
  EXPECT_TRUE(chosen.empty());
  EXPECT_FALSE(CheapestCover(costs, 951, &chosen));
  ASSERT_TRUE(CheapestCover(costs, 950, &chosen));
  EXPECT_EQ(chosen.size(), 5u);
}

TEST(Checkpoint, CheapestCoverIsOptimalOnSmallCases) {
  // Brute force over all subsets.
  std::vector<BlockCost> costs = {{7, 5}, {3, 1}, {9, 8}, {4, 2}, {6, 3}, {2, 1}, {8, 9}};
  for (int64_t need = 1; need <= 39; ++need) {
    double best = 1e300;
    for (int mask = 0; mask < (1 << costs.size()); ++mask) {
      int64_t bytes = 0, flops = 0;
      for (size_t i = 0; i < costs.size(); ++i) {
        if (mask & (1 << i)) {
          bytes += costs[i].bytes;
          flops += costs[i].flops;
        }
      }
      if (bytes >= need) best = std::min(best, static_cast<double>(flops));
    }
    std::vector<int> chosen;
    ASSERT_TRUE(CheapestCover(costs, need, &chosen)) << need;
    int64_t bytes = 0, flops = 0;
    for (int i : chosen) {
      bytes += costs[i].bytes;
      flops += costs[i].flops;
    }
    EXPECT_GE(bytes, need);
    EXPECT_EQ(flops, best) << "need " << need;
  }
}

}  // namespace
}  // namespace memplan
