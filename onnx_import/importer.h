#ifndef MEMPLAN_ONNX_IMPORT_IMPORTER_H_
#define MEMPLAN_ONNX_IMPORT_IMPORTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/status.h"

namespace memplan {

/// The default node limit: a 500,000-node chain plans in about 4.5 CPU-s
/// and 1.7 GiB (README, "Large graphs and the advisor"); the CLI's
/// --max-nodes changes it.
inline constexpr int64_t kDefaultMaxNodes = 500000;

/// Limits on what the importer accepts (documented in the README).
struct ImportLimits {
  int64_t max_file_bytes = int64_t{2} << 30;           ///< protobuf's own 2 GiB cap.
  int max_subgraph_depth = 16;                         ///< If/Loop/Scan nesting.
  int64_t max_nodes = kDefaultMaxNodes;                ///< All graphs together.
  int64_t max_value_elements = 4096;                   ///< Small constants kept as values.
  int64_t max_name_bytes = 4096;                       ///< Each node, tensor, attribute name.
  int max_module_depth = 64;                           ///< Levels of a node's module path.
  int64_t max_module_path_bytes = int64_t{256} << 20;  ///< All nodes' module paths together.
};

/// Reads `path` (an ONNX ModelProto, or one gzip-compressed: `model.onnx.gz`)
/// into a Graph: dims, dtypes, attributes, small integer constants and
/// value_info. Weight bytes are never kept, and external-data files are never
/// opened. Errors start with the path.
Result<Graph> ImportOnnxFile(const std::string& path, const ImportLimits& limits = {});

/// Same, from bytes already in memory; `source` names them in errors.
Result<Graph> ImportOnnxBytes(const std::string& bytes, const std::string& source,
                              const ImportLimits& limits = {});

/// What the first source line of a Python statement binds, as the dynamo
/// exporter's stack trace shows it ("q, k, v = self.qkv(x).unbind(0)" ->
/// kAssign with targets {{"q", "k", "v"}}). A line that cannot start a
/// statement (unbalanced closing brackets, a trailing comma, a leading
/// operator, `key=value` without spaces) is kUnknown.
PyStatement ParsePyStatement(const std::string& line);

/// The frames of a `pkg.torch.onnx.stack_trace` value, outermost first:
/// file, line, function, and the statement its source line starts.
std::vector<SourceFrame> ParseStackTrace(const std::string& trace);

}  // namespace memplan

#endif  // MEMPLAN_ONNX_IMPORT_IMPORTER_H_
