#ifndef MEMPLAN_PLANNER_OPS_OP_NAMES_H_
#define MEMPLAN_PLANNER_OPS_OP_NAMES_H_

/// Names of the registered ops that the schedule creates (autocast casts, the
/// eager attention sequence, fused regions) or that a graph pattern matcher
/// (attention.cc, fusion.cc, rnn.cc) or a detector (export_mode.cc,
/// loss_target.cc) looks for, so that op names are written
/// only in planner/ops/ (tests/op_names_rule.py checks the rest of planner/).

namespace memplan {
namespace op_names {

inline constexpr char kAdd[] = "Add";
inline constexpr char kBatchNormalization[] = "BatchNormalization";
inline constexpr char kCast[] = "Cast";
inline constexpr char kCastLike[] = "CastLike";
inline constexpr char kConcat[] = "Concat";
inline constexpr char kDiv[] = "Div";
inline constexpr char kDropout[] = "Dropout";
inline constexpr char kErf[] = "Erf";
inline constexpr char kExpand[] = "Expand";
inline constexpr char kGRU[] = "GRU";
inline constexpr char kGelu[] = "Gelu";
inline constexpr char kGemm[] = "Gemm";
inline constexpr char kGlu[] = "Glu";
inline constexpr char kGroupNormalization[] = "GroupNormalization";
inline constexpr char kIdentity[] = "Identity";
inline constexpr char kInstanceNormalization[] = "InstanceNormalization";
inline constexpr char kIsNaN[] = "IsNaN";
inline constexpr char kHardSigmoid[] = "HardSigmoid";
inline constexpr char kLSTM[] = "LSTM";
inline constexpr char kLogSoftmax[] = "LogSoftmax";
inline constexpr char kMatMul[] = "MatMul";
inline constexpr char kMul[] = "Mul";
inline constexpr char kPow[] = "Pow";
inline constexpr char kReciprocal[] = "Reciprocal";
inline constexpr char kReduceL2[] = "ReduceL2";
inline constexpr char kReduceMean[] = "ReduceMean";
inline constexpr char kReshape[] = "Reshape";
inline constexpr char kRsqrt[] = "Rsqrt";
inline constexpr char kSigmoid[] = "Sigmoid";
inline constexpr char kSoftmax[] = "Softmax";
inline constexpr char kSplit[] = "Split";
inline constexpr char kSqrt[] = "Sqrt";
inline constexpr char kSwish[] = "Swish";
inline constexpr char kWhere[] = "Where";
inline constexpr char kTanh[] = "Tanh";
inline constexpr char kTile[] = "Tile";
inline constexpr char kTranspose[] = "Transpose";
inline constexpr char kUnsqueeze[] = "Unsqueeze";
inline constexpr char kWeightNorm[] = "WeightNorm";

}  // namespace op_names
}  // namespace memplan

#endif  // MEMPLAN_PLANNER_OPS_OP_NAMES_H_
