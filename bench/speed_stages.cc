// Where one plan's time goes: import, shape inference, the schedule, one
// train plan (every variant MakePlan runs), and a full advise search, each
// timed with std::chrono (median of --runs) and the process's peak RSS after
// each stage (getrusage). Used to profile bench/speed.sh's graphs.
//
// Usage: speed_stages MODEL.onnx [--batch N] [--runs N] [--advise]
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "onnx_import/importer.h"
#include "planner/advisor.h"
#include "planner/devices.h"
#include "planner/plan_model.h"
#include "planner/schedule.h"

namespace {

double MedianMs(int runs, const std::function<void()>& f) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

long PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "speed_stages: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  // The heap settings of memplan's main (cli/main.cc), so that the stages
  // cost here what they cost in the CLI.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
  if (argc < 2) Die("usage: speed_stages MODEL.onnx [--batch N] [--runs N] [--advise]");
  const std::string path = argv[1];
  int64_t batch = 8;
  int runs = 3;
  bool advise = false;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--batch") && i + 1 < argc) {
      batch = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--advise")) {
      advise = true;
    } else {
      Die(std::string("unknown argument ") + argv[i]);
    }
  }
  memplan::Graph g;
  const double import_ms = MedianMs(runs, [&] {
    auto r = memplan::ImportOnnxFile(path);
    if (!r.ok()) Die(r.message());
    g = std::move(r.value());
  });
  std::printf("import      %9.1f ms  rss %ld MiB  (%zu nodes, %zu tensors)\n", import_ms,
              PeakRssMiB(), g.nodes.size(), g.tensors.size());
  memplan::ShapeBindings b;
  b.batch = batch;
  memplan::Graph bound;
  const double infer_ms = MedianMs(runs, [&] {
    auto r = memplan::BindShapes(g, b, nullptr);
    if (!r.ok()) Die(r.message());
    bound = std::move(r.value());
  });
  std::printf("shapes      %9.1f ms  rss %ld MiB\n", infer_ms, PeakRssMiB());
  memplan::PlanOptions o;
  o.mode = memplan::Mode::kTrain;
  o.keep_events = false;
  const double sched_ms = MedianMs(runs, [&] {
    auto r = memplan::BuildSchedule(bound, o);
    if (!r.ok()) Die(r.message());
  });
  std::printf("schedule    %9.1f ms  rss %ld MiB\n", sched_ms, PeakRssMiB());
  const double plan_ms = MedianMs(runs, [&] {
    auto r = memplan::MakePlan(bound, batch, o);
    if (!r.ok()) Die(r.message());
  });
  std::printf("train plan  %9.1f ms  rss %ld MiB  (schedule + simulation, all variants)\n", plan_ms,
              PeakRssMiB());
  if (advise) {
    memplan::AdviseRequest r;
    r.base = o;
    r.precisions = {memplan::Precision::kAmpBf16, memplan::Precision::kAmpFp16,
                    memplan::Precision::kFp32};
    r.checkpoint = true;
    r.device = *memplan::FindDevice("h100-sxm");
    r.budget_bytes = r.device.memory_bytes;
    int plans = 0;
    const double advise_ms = MedianMs(runs, [&] {
      auto a = memplan::Advise(g, r);
      if (!a.ok()) Die(a.message());
      plans = a->plans;
    });
    std::printf("advise      %9.1f ms  rss %ld MiB  (%d plans; %.1fx one plan with its shapes)\n",
                advise_ms, PeakRssMiB(), plans, advise_ms / (plan_ms + infer_ms));
  }
  return 0;
}
