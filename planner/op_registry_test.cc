// The registry test: every registered op's OpDef is complete and its facts
// agree with each other (what the schedule, the parameter classifier and the
// simulation read instead of op names).
#include "planner/op_registry.h"

#include <gtest/gtest.h>

#include <string>

namespace memplan {
namespace {

TEST(OpRegistry, EveryEntryIsCompleteAndConsistent) {
  const auto& ops = AllOps();
  ASSERT_GT(ops.size(), 100u);
  int views = 0, cublas = 0, contiguous = 0, weights = 0, promoting = 0, inplace = 0;
  for (const auto& [name, d] : ops) {
    SCOPED_TRACE(name);
    EXPECT_NE(d.shape, nullptr) << "every op has a shape function";
    // Views: only the view-only facts, and a view's gradient.
    const bool viewing = d.alias == Alias::kView || d.eval_identity;
    if (!viewing) {
      EXPECT_EQ(d.view, ViewRule::kReshape) << "a view rule on an op that is no view";
      EXPECT_EQ(d.view_outputs, -1);
      EXPECT_NE(d.grad, GradKind::kGather) << "gather gradients are for views";
    } else {
      EXPECT_TRUE(d.differentiable);
      EXPECT_EQ(d.autocast, Autocast::kPassthrough) << "views do not cast";
      ++views;
    }
    if (d.alias == Alias::kView) {
      EXPECT_TRUE(d.grad == GradKind::kAlias || d.grad == GradKind::kGather);
      EXPECT_EQ(d.saves, nullptr) << "a view keeps nothing for backward";
    }
    EXPECT_NE(d.grad, GradKind::kBiasAdd) << "BiasAdd is the schedule's own fusion";
    if (d.eval_identity) {
      EXPECT_EQ(d.alias, Alias::kNone) << "eval_identity: a view only in inference";
      EXPECT_EQ(d.view, ViewRule::kSame);
    }
    // Library calls.
    if (d.kernel == ValidationKernel::kGemm) {
      EXPECT_TRUE(d.matmul_operands);
    }
    if (d.kernel == ValidationKernel::kConv) {
      EXPECT_TRUE(d.cudnn_conv);
    }
    if (d.matmul_operands) {
      EXPECT_TRUE(d.uses_cublas);
    }
    if (d.uses_cublas || d.cudnn_conv) {
      EXPECT_EQ(d.autocast, Autocast::kLowPrecision) << "cuBLAS/cuDNN ops are on autocast's list";
      EXPECT_NE(d.flops, nullptr) << "library ops count their FLOPs";
    }
    if (d.cudnn_conv) {
      EXPECT_TRUE(d.contiguous_input0);
    }
    // Dtypes.
    if (d.is_add) {
      EXPECT_EQ(d.output_dtype, OutputDType::kPromote);
      EXPECT_EQ(d.inplace, InPlaceUse::kResidualAdd);
    }
    if (d.output_dtype == OutputDType::kCastTarget || d.output_dtype == OutputDType::kLikeInput1) {
      EXPECT_TRUE(d.passes_weight) << "a cast weight is still the weight";
    }
    if (d.passes_weight) {
      EXPECT_TRUE(d.alias == Alias::kView || d.output_dtype == OutputDType::kCastTarget ||
                  d.output_dtype == OutputDType::kLikeInput1)
          << "only views and casts pass a weight through";
    }
    // In place and parameters.
    if (d.inplace != InPlaceUse::kNever) {
      EXPECT_TRUE(d.differentiable);
      EXPECT_EQ(d.alias, Alias::kNone);
      ++inplace;
    }
    if (!d.differentiable) {
      EXPECT_EQ(d.weight_inputs, 0u) << "a weight needs a gradient";
      EXPECT_EQ(d.saves, nullptr);
    }
    EXPECT_EQ(d.weight_inputs & d.buffer_inputs, 0u) << "an input is a weight or a buffer";
    if (d.host_only) {
      EXPECT_FALSE(d.differentiable);
    }
    if (d.makes_indices) {
      EXPECT_NE(d.saves, nullptr) << "indices are what backward keeps";
    }
    cublas += d.uses_cublas;
    contiguous += d.contiguous_input0;
    weights += d.weight_inputs != 0;
    promoting += d.output_dtype == OutputDType::kPromote;
  }
  // Each fact is set somewhere (a registration that lost its facts shows here).
  EXPECT_GE(views, 12);
  EXPECT_GE(cublas, 6);
  EXPECT_GE(contiguous, 15);
  EXPECT_GE(weights, 15);
  EXPECT_GE(promoting, 10);
  EXPECT_GE(inplace, 6);
}

TEST(OpRegistry, InputBits) {
  EXPECT_EQ(InputBits(1, 2), 6u);
  EXPECT_TRUE(HasSlot(InputBits(1, 3), 3));
  EXPECT_FALSE(HasSlot(InputBits(1, 3), 0));
  EXPECT_FALSE(HasSlot(InputBits(1, 3), 4));
  EXPECT_TRUE(HasSlot(kAllInputs, 40));
  EXPECT_FALSE(HasSlot(InputBits(0, 30), 40));
  EXPECT_FALSE(HasSlot(kAllInputs, -1));
}

}  // namespace
}  // namespace memplan
