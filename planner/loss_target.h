#ifndef MEMPLAN_PLANNER_LOSS_TARGET_H_
#define MEMPLAN_PLANNER_LOSS_TARGET_H_

/// Does the first graph output look like what F.cross_entropy takes, raw
/// class logits? memplan puts the loss (cross entropy by default) on that
/// output; a regression or image output, or one already normalised, planned
/// with it is a silent wrong answer. The rules read only the graph.

#include <string>

#include "planner/graph.h"

namespace memplan {

/// Why the first output of `g` does not look like class logits, or "" when
/// it does (or there is none). In order, the first that holds:
///  1. it is not a float tensor;
///  2. it is a scalar (the model computes its own loss) or has rank 1 (one
///     value per sample, no class dim);
///  3. its class dim (dim 1 from rank 4 on, else the last, as the planner's
///     loss reads it) is 1: a regression or binary score;
///  4. its producer, looking through views and casts, is a Sigmoid,
///     HardSigmoid or Tanh (bounded values), a Softmax (probabilities) or a
///     LogSoftmax (log-probabilities: F.nll_loss, not cross entropy);
///  5. it has the shape of a float graph input, dim by dim (the same size or
///     the same symbol), rank 2 or more: an input-to-output map
///     (reconstruction, denoising, a diffusion model's noise), not logits.
/// Shapes are the inferred ones where known, else those the file declares.
[[nodiscard]] std::string NotClassLogits(const Graph& g);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_LOSS_TARGET_H_
