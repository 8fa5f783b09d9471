// TensorIterator's output layout, with strides derived by hand.
#include "planner/layout.h"

#include <gtest/gtest.h>

#include <vector>

namespace memplan {
namespace {

using V = std::vector<int64_t>;

TEST(Layout, ContiguousInputsGiveAContiguousOutput) {
  EXPECT_EQ(ElementwiseOutputStrides({2, 3, 4}, {{{2, 3, 4}, {12, 4, 1}}, {{4}, {1}}}),
            V({12, 4, 1}));
}

TEST(Layout, TransposedViewKeepsItsLayout) {
  // [B=2, S=5, H=4, D=8] viewed as [B, H, S, D]: strides (160, 8, 32, 1).
  EXPECT_EQ(ElementwiseOutputStrides({2, 4, 5, 8}, {{{2, 4, 5, 8}, {160, 8, 32, 1}}}),
            V({160, 8, 32, 1}));
  // Times a broadcast [1, 1, S, D] table (rotary cos): the first operand that
  // tells two dims apart decides, so the transposed layout stays.
  EXPECT_EQ(ElementwiseOutputStrides(
                {2, 4, 5, 8}, {{{2, 4, 5, 8}, {160, 8, 32, 1}}, {{1, 1, 5, 8}, {40, 40, 8, 1}}}),
            V({160, 8, 32, 1}));
}

TEST(Layout, PermutedPositionBiasPutsHeadsInnermost) {
  // T5: values [S=4, S=4, H=3] permuted to [1, H, S, S] (strides 48, 1, 12, 3),
  // combined with a [1, 1, S, 1] condition: heads innermost, last-dim stride 3.
  const V out = ElementwiseOutputStrides(
      {2, 3, 4, 4}, {{{1, 1, 4, 1}, {4, 4, 1, 1}}, {{1, 3, 4, 4}, {48, 1, 12, 3}}});
  EXPECT_EQ(out, V({48, 1, 12, 3}));
}

TEST(Layout, WhichOpsKeepTheLayout) {
  EXPECT_TRUE(IsTensorIteratorOp("Mul"));
  EXPECT_TRUE(IsTensorIteratorOp("Where"));
  EXPECT_TRUE(IsTensorIteratorOp("Cast"));
  EXPECT_FALSE(IsTensorIteratorOp("MatMul"));
  EXPECT_FALSE(IsTensorIteratorOp("Softmax"));
}

}  // namespace
}  // namespace memplan
