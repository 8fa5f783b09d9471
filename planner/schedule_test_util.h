#ifndef MEMPLAN_PLANNER_SCHEDULE_TEST_UTIL_H_
#define MEMPLAN_PLANNER_SCHEDULE_TEST_UTIL_H_

/// Test-only helpers: the inference schedule of a hand-built graph, and
/// where an op of it stands.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "planner/ops/test_graph.h"
#include "planner/options.h"
#include "planner/schedule.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace testing_util {

/// The inference schedule of `b` at `batch` (an empty one, with a test
/// failure, where shape inference or the build fails).
inline Schedule InferenceScheduleOf(GraphBuilder& b, int64_t batch) {
  ShapeBindings bind;
  bind.batch = batch;
  EXPECT_TRUE(InferShapes(&b.g, bind, nullptr).ok());
  PlanOptions o;
  o.mode = Mode::kInference;
  auto s = BuildSchedule(b.g, o);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? s.value() : Schedule();
}

/// The index of the first op whose label contains `label`; -1: none.
inline int OpIndex(const Schedule& s, const std::string& label) {
  for (size_t i = 0; i < s.ops.size(); ++i) {
    if (s.ops[i].label.find(label) != std::string::npos) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace testing_util
}  // namespace memplan

#endif  // MEMPLAN_PLANNER_SCHEDULE_TEST_UTIL_H_
