// libFuzzer target over everything `memplan plan --batch 2` does to a file:
// import, shape inference, and planning (inference and training); and over
// the JSON inputs of `memplan check`: an input whose first non-blank byte is
// '{' or '[' is read as a budget file (--config) and as a baseline.
//
// Built with -DMEMPLAN_FUZZ=ON and clang (see .ci/fuzz.sh). Without
// libFuzzer the same file builds a regression runner
// (MEMPLAN_FUZZ_STANDALONE): `fuzz_import_regression FILE...` runs each
// file through the same steps, so the corpus and any crash the fuzzer once
// found run under the ordinary (and sanitizer) test suite.
//
// Besides crashes, the harness aborts when an error message is not one line
// that starts with the file name: every rejection must name its source.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/check_config.h"
#include "cli/files.h"
#include "cli/report.h"
#include "onnx_import/importer.h"
#include "planner/graph.h"
#include "planner/plan.h"
#include "planner/shape_inference.h"

namespace {

constexpr char kSource[] = "fuzz.onnx";
constexpr char kJsonSource[] = "fuzz.json";

// Aborts unless `message` is one non-empty line naming the file.
void CheckMessage(const std::string& message, const char* stage, const char* source = kSource) {
  const std::string prefix = std::string(source) + ":";
  const bool ok = message.size() > prefix.size() &&
                  message.compare(0, prefix.size(), prefix) == 0 &&
                  message.find('\n') == std::string::npos;
  if (!ok) {
    std::fprintf(stderr, "fuzz_import: bad %s error message: \"%s\"\n", stage, message.c_str());
    std::abort();
  }
}

// The budget file and baseline parsers (no models are read).
void RunJson(const std::string& text) {
  std::string metric = "device";
  auto config = memplan::ParseCheckConfig(text, kJsonSource, &metric);
  if (!config.ok()) CheckMessage(config.message(), "budget file", kJsonSource);
  auto doc = memplan::ParseJsonDocument(text, kJsonSource);
  if (!doc.ok()) {
    CheckMessage(doc.message(), "baseline", kJsonSource);
    return;
  }
  auto baseline = memplan::ParseBaseline(doc.value());
  if (!baseline.ok()) {
    CheckMessage(std::string(kJsonSource) + ": " + baseline.message(), "baseline", kJsonSource);
    return;
  }
  for (const auto& kv : baseline.value()) {
    for (const char* key : {"allocated_bytes", "reserved_bytes", "device_bytes"}) {
      if (kv.second[key].get<int64_t>() < 0) {
        std::fprintf(stderr, "fuzz_import: baseline accepted a negative %s\n", key);
        std::abort();
      }
    }
  }
}

void RunOne(const uint8_t* data, size_t size) {
  size_t first = 0;
  while (first < size && (data[first] == ' ' || data[first] == '\n' || data[first] == '\t' ||
                          data[first] == '\r')) {
    ++first;
  }
  if (first < size && (data[first] == '{' || data[first] == '[')) {
    RunJson(std::string(reinterpret_cast<const char*>(data), size));
    return;
  }
  memplan::ImportLimits limits;
  // Keep single inputs fast; the limits themselves are tested by the corpus.
  limits.max_nodes = 20000;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  memplan::Result<memplan::Graph> imported = memplan::ImportOnnxBytes(bytes, kSource, limits);
  if (!imported.ok()) {
    CheckMessage(imported.message(), "import");
    return;
  }
  const memplan::Graph& raw = imported.value();
  // Bind like `plan --batch 2`, and every other input symbol to 3.
  memplan::ShapeBindings bindings;
  const std::string batch_symbol = memplan::BatchSymbol(raw);
  if (!batch_symbol.empty()) bindings.batch = 2;
  for (int id : raw.inputs) {
    for (const memplan::Dim& d : raw.tensors[id].declared) {
      if (!d.symbol.empty() && d.symbol != batch_symbol) bindings.dims[d.symbol] = 3;
    }
  }
  memplan::Graph g = raw;
  std::vector<std::string> warnings;
  memplan::Status s = memplan::InferShapes(&g, bindings, &warnings);
  if (!s.ok()) {
    CheckMessage(s.message(), "shape inference");
    return;
  }
  for (memplan::Mode mode : {memplan::Mode::kInference, memplan::Mode::kTrain}) {
    memplan::PlanOptions options;
    options.mode = mode;
    if (mode == memplan::Mode::kTrain) options.precision = memplan::Precision::kAmpBf16;
    memplan::Result<memplan::Plan> plan = memplan::MakePlan(g, bindings.batch, options);
    if (!plan.ok()) {
      CheckMessage(plan.message(), "plan");
      continue;
    }
    if (plan->peak.allocated_bytes < 0 || plan->peak.reserved_bytes < plan->peak.allocated_bytes) {
      std::fprintf(stderr, "fuzz_import: implausible peak %lld allocated, %lld reserved\n",
                   static_cast<long long>(plan->peak.allocated_bytes),
                   static_cast<long long>(plan->peak.reserved_bytes));
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RunOne(data, size);
  return 0;
}

#ifdef MEMPLAN_FUZZ_STANDALONE
int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    std::ifstream f(argv[i], std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "%s: cannot open\n", argv[i]);
      return 2;
    }
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    RunOne(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz_import: %d inputs ok\n", argc - 1);
  return 0;
}
#endif
