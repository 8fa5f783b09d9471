#include "planner/graph.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace memplan {
namespace {

// The name index grows with the graph: every name keeps the id it got, is
// found again after many more are added, and names never added are absent.
TEST(GraphNames, FindAfterGrowth) {
  Graph g;
  EXPECT_EQ(g.Find("x"), -1);
  constexpr int kNames = 20000;
  for (int i = 0; i < kNames; ++i) {
    ASSERT_EQ(g.FindOrAdd("t" + std::to_string(i)), i);
  }
  ASSERT_EQ(g.tensors.size(), static_cast<size_t>(kNames));
  for (int i = 0; i < kNames; ++i) {
    const std::string name = "t" + std::to_string(i);
    ASSERT_EQ(g.Find(name), i);
    ASSERT_EQ(g.FindOrAdd(name), i);  // no second tensor
    ASSERT_EQ(g.tensors[i].name, name);
  }
  EXPECT_EQ(g.tensors.size(), static_cast<size_t>(kNames));
  EXPECT_EQ(g.Find("t20000"), -1);
  EXPECT_EQ(g.Find(""), -1);
  EXPECT_EQ(g.Find("t1 "), -1);
  EXPECT_EQ(g.FindOrAdd(""), kNames);  // the empty name is a name like any other
  EXPECT_EQ(g.Find(""), kNames);
}

// Copies and moves keep the index of their own tensors.
TEST(GraphNames, CopiesFindTheirTensors) {
  Graph g;
  for (const char* n : {"a", "b", "a.b", "/layer1/Conv_output_0"}) g.FindOrAdd(n);
  Graph copy = g;
  copy.FindOrAdd("only_in_copy");
  EXPECT_EQ(copy.Find("a.b"), 2);
  EXPECT_EQ(copy.Find("/layer1/Conv_output_0"), 3);
  EXPECT_EQ(copy.Find("only_in_copy"), 4);
  EXPECT_EQ(g.Find("only_in_copy"), -1);
  Graph moved = std::move(copy);
  EXPECT_EQ(moved.Find("b"), 1);
  EXPECT_EQ(moved.Find("only_in_copy"), 4);
}

}  // namespace
}  // namespace memplan
