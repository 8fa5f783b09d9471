#ifndef MEMPLAN_PLANNER_SHAPE_INFERENCE_H_
#define MEMPLAN_PLANNER_SHAPE_INFERENCE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/status.h"

namespace memplan {

/// Largest tensor shape inference accepts: 2^50 bytes (1 PiB), what the
/// allocator simulation accepts for one request. Beyond it: an error naming
/// the tensor, never a wrapped-around size.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 50;
/// Largest sum of all tensor sizes (2^56 bytes), so that the plan's sums of
/// bytes stay far inside int64.
constexpr int64_t kMaxTotalTensorBytes = int64_t{1} << 56;

/// Values for the symbolic dims of a model.
struct ShapeBindings {
  int64_t batch = -1;                   ///< Binds the batch symbol (see BatchSymbol()).
  std::string batch_dim;                ///< Names the batch symbol ("" = BatchSymbol()).
  std::map<std::string, int64_t> dims;  ///< Any symbol by name.
};

/// Gives every tensor of `g` a concrete shape and dtype for `b`, running the
/// per-op shape functions in topological order and evaluating small integer
/// subgraphs (Shape, Gather, Concat, ...). Declared shapes (value_info) must
/// agree. Ops without a shape function fall back to declared shapes with a
/// warning, else fail. Errors name the file and the node or tensor.
Status InferShapes(Graph* g, const ShapeBindings& b, std::vector<std::string>* warnings);

/// The batch symbol: a symbol called "batch" in any graph input's dims
/// (wherever it sits: nn.LSTM's [seq, batch, feature] too); else the symbol of
/// dim 0 of the first graph input; "" when there is neither.
std::string BatchSymbol(const Graph& g);

/// The symbols of the graph inputs' declared dims, sorted.
std::vector<std::string> InputSymbols(const Graph& g);

/// What `b` binds, symbol by symbol, checked against the model: every --dim
/// must name a symbol the model declares (the error lists the ones it has),
/// --batch-dim too; --batch needs a batch symbol, and a --dim for that same
/// symbol with another value is a conflict. `batch_symbol` gets the batch
/// symbol in force ("" when none).
Result<std::map<std::string, int64_t>> ResolveBindings(const Graph& g, const ShapeBindings& b,
                                                       std::string* batch_symbol);

/// Node indices in a topological order (file order where valid); fails on a
/// cycle or on an input that nothing produces, naming the node and tensor.
Result<std::vector<int>> TopologicalOrder(const Graph& g);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_SHAPE_INFERENCE_H_
