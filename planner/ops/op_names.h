#ifndef MEMPLAN_PLANNER_OPS_OP_NAMES_H_
#define MEMPLAN_PLANNER_OPS_OP_NAMES_H_

/// Names of the registered ops that the schedule itself creates (autocast
/// casts, the eager attention sequence), so that op names are written only
/// in planner/ops/ (op_names_test checks the rest of planner/).

namespace memplan {
namespace op_names {

inline constexpr char kAdd[] = "Add";
inline constexpr char kCast[] = "Cast";
inline constexpr char kDiv[] = "Div";
inline constexpr char kDropout[] = "Dropout";
inline constexpr char kLSTM[] = "LSTM";
inline constexpr char kMatMul[] = "MatMul";
inline constexpr char kMul[] = "Mul";
inline constexpr char kSoftmax[] = "Softmax";
inline constexpr char kTile[] = "Tile";
inline constexpr char kTranspose[] = "Transpose";

}  // namespace op_names
}  // namespace memplan

#endif  // MEMPLAN_PLANNER_OPS_OP_NAMES_H_
