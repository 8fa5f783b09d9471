#include "planner/ops/op_util.h"

#include <gtest/gtest.h>

namespace memplan {
namespace {

TEST(OpUtil, BroadcastShapes) {
  std::vector<int64_t> out;
  ASSERT_TRUE(BroadcastShapes({2, 1, 4}, {3, 1}, &out));
  EXPECT_EQ(out, (std::vector<int64_t>{2, 3, 4}));
  ASSERT_TRUE(BroadcastShapes({}, {5}, &out));
  EXPECT_EQ(out, (std::vector<int64_t>{5}));
  ASSERT_TRUE(BroadcastShapes({0, 1}, {1, 7}, &out));
  EXPECT_EQ(out, (std::vector<int64_t>{0, 7}));
  EXPECT_FALSE(BroadcastShapes({2, 3}, {4, 3}, &out));
}

TEST(OpUtil, NormalizeAxis) {
  int64_t a = 0;
  EXPECT_TRUE(NormalizeAxis(-1, 3, &a));
  EXPECT_EQ(a, 2);
  EXPECT_FALSE(NormalizeAxis(3, 3, &a));
  EXPECT_FALSE(NormalizeAxis(-4, 3, &a));
  std::vector<int64_t> axes;
  EXPECT_FALSE(NormalizeAxes({0, -3}, 3, true, &axes));
  EXPECT_TRUE(NormalizeAxes({0, -1}, 3, true, &axes));
  EXPECT_EQ(axes, (std::vector<int64_t>{0, 2}));
}

TEST(OpUtil, ShapeStringAndNumel) {
  EXPECT_EQ(ShapeString({2, 3}), "[2, 3]");
  EXPECT_EQ(ShapeString({}), "[]");
  EXPECT_EQ(Numel({2, 3}), 6);
  EXPECT_EQ(Numel({}), 1);
  EXPECT_EQ(Numel({int64_t{1} << 40, int64_t{1} << 40}), -1);
}

TEST(OpUtil, BroadcastIndexRepeatsSizeOneDims) {
  // Output [2, 3]; input [2, 1] -> index by row only.
  EXPECT_EQ(BroadcastIndex({1, 2}, {2, 1}), 1);
  EXPECT_EQ(BroadcastIndex({1, 2}, {3}), 2);
  EXPECT_EQ(BroadcastIndex({1, 2}, {}), 0);
}

}  // namespace
}  // namespace memplan
