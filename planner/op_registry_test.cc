// The registry test: every registered op's OpDef is complete and its facts
// agree with each other (what the schedule, the parameter classifier and the
// simulation read instead of op names).
#include "planner/op_registry.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "planner/ops/op_names.h"

namespace memplan {
namespace {

TEST(OpRegistry, EveryEntryIsCompleteAndConsistent) {
  const auto& ops = AllOps();
  ASSERT_GT(ops.size(), 100u);
  int views = 0, cublas = 0, contiguous = 0, weights = 0, promoting = 0, inplace = 0;
  int edits = 0, masks = 0, dims_only = 0, recurrent = 0;
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
    // Pattern facts (attention.cc, fusion.cc, rnn.cc).
    if (d.score_edit != ScoreEdit::kNone) {
      EXPECT_EQ(d.output_dtype, OutputDType::kPromote) << "score edits are elementwise";
      EXPECT_TRUE(d.tensor_iterator);
    }
    if (d.mask_maker == MaskMaker::kComparison) {
      EXPECT_FALSE(d.differentiable) << "a comparison makes a bool mask";
    }
    if (d.reads_dims_only || d.fills_constant) {
      EXPECT_FALSE(d.differentiable);
      EXPECT_EQ(d.alias, Alias::kNone);
    }
    if (d.recurrent) {
      EXPECT_TRUE(d.uses_cublas);
      EXPECT_TRUE(d.contiguous_input0);
    }
    edits += d.score_edit != ScoreEdit::kNone;
    masks += d.mask_maker != MaskMaker::kNone;
    dims_only += d.reads_dims_only;
    recurrent += d.recurrent;
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
  EXPECT_EQ(edits, 5);      // Add, Sub, Mul, Div, Where
  EXPECT_EQ(masks, 5);      // Less, LessOrEqual, Greater, GreaterOrEqual, Trilu
  EXPECT_EQ(dims_only, 2);  // Shape, Size
  EXPECT_EQ(recurrent, 3);  // LSTM, GRU, RNN
}

// The view and cast families the pattern matchers walk through, from OpDef.
// The default domain's index finds every registered op by its type, in
// either spelling of the domain, as the entry itself; other names (one
// letter more or less, another case, empty) find their entry when there is
// one and nothing otherwise.
TEST(OpRegistry, FindReturnsEveryEntryAndNothingElse) {
  const auto& ops = AllOps();
  auto entry = [&](const std::string& type) -> const OpDef* {
    auto it = ops.find("::" + type);
    return it == ops.end() ? nullptr : &it->second;
  };
  int found = 0;
  for (const auto& [key, def] : ops) {
    const size_t sep = key.find("::");
    ASSERT_NE(sep, std::string::npos);
    const std::string domain = key.substr(0, sep);
    const std::string type = key.substr(sep + 2);
    SCOPED_TRACE(key);
    EXPECT_EQ(FindOp(domain, type), &def);
    if (!domain.empty()) continue;
    EXPECT_EQ(FindOp("ai.onnx", type), &def);
    std::string lower = type;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const std::string& other : {type + "x", type.substr(0, type.size() - 1), lower}) {
      EXPECT_EQ(FindOp("", other), entry(other)) << other;
    }
    ++found;
  }
  EXPECT_GT(found, 100);
  EXPECT_EQ(FindOp("", ""), nullptr);
  EXPECT_EQ(FindOp("", "NoSuchOp"), nullptr);
}

TEST(OpRegistry, ViewAndCastFamilies) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) {
    EXPECT_TRUE(IsReshapeView(*FindOp("", op))) << op;
    EXPECT_FALSE(IsTransposeView(*FindOp("", op))) << op;
  }
  EXPECT_TRUE(IsTransposeView(*FindOp("", "Transpose")));
  EXPECT_TRUE(IsExpandView(*FindOp("", "Expand")));
  EXPECT_FALSE(IsReshapeView(*FindOp("", "Expand")));
  // Dropout is a view only in inference: not a reshape for the patterns.
  EXPECT_FALSE(IsReshapeView(*FindOp("", "Dropout")));
  EXPECT_FALSE(IsReshapeView(*FindOp("", "Slice")));
  for (const char* op : {"Cast", "CastLike"}) EXPECT_TRUE(IsCast(*FindOp("", op))) << op;
  EXPECT_FALSE(IsCast(*FindOp("", "Relu")));
  EXPECT_EQ(FindOp("", "Mul")->score_edit, ScoreEdit::kScale);
  EXPECT_EQ(FindOp("", "Where")->score_edit, ScoreEdit::kSelect);
  EXPECT_EQ(FindOp("", "Trilu")->mask_maker, MaskMaker::kTriangle);
  EXPECT_TRUE(FindOp("", "ConstantOfShape")->fills_constant);
}

// Every name in op_names.h is a registered op (a typo would match nothing).
TEST(OpRegistry, OpNamesAreRegistered) {
  for (const char* op : {op_names::kAdd,
                         op_names::kCast,
                         op_names::kCastLike,
                         op_names::kConcat,
                         op_names::kDiv,
                         op_names::kDropout,
                         op_names::kErf,
                         op_names::kExpand,
                         op_names::kGRU,
                         op_names::kGelu,
                         op_names::kGroupNormalization,
                         op_names::kIdentity,
                         op_names::kInstanceNormalization,
                         op_names::kIsNaN,
                         op_names::kLSTM,
                         op_names::kMatMul,
                         op_names::kMul,
                         op_names::kPow,
                         op_names::kReciprocal,
                         op_names::kReduceMean,
                         op_names::kReshape,
                         op_names::kSigmoid,
                         op_names::kSoftmax,
                         op_names::kSqrt,
                         op_names::kSwish,
                         op_names::kTile,
                         op_names::kTranspose,
                         op_names::kUnsqueeze}) {
    EXPECT_NE(FindOp("", op), nullptr) << op;
  }
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
