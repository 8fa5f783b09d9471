#include "planner/options.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace memplan {
namespace {

/// Every table: values 0..n-1 once each, names unique and lower case, and
/// parsing a name gives its value back.
template <typename E>
void CheckTable() {
  std::set<int> values;
  std::set<std::string> names;
  for (const EnumEntry<E>& e : EnumTable<E>::kEntries) {
    const int v = static_cast<int>(e.value);
    EXPECT_TRUE(values.insert(v).second) << EnumTable<E>::kOption << ": value " << v << " twice";
    EXPECT_TRUE(names.insert(e.name).second) << EnumTable<E>::kOption << ": " << e.name;
    for (char c : std::string(e.name)) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') << e.name;
    }
    EXPECT_STREQ(EnumName(e.value), e.name);
    auto parsed = ParseEnum<E>(e.name);
    ASSERT_TRUE(parsed.ok()) << parsed.message();
    EXPECT_EQ(parsed.value(), e.value);
  }
  const int n = static_cast<int>(values.size());
  EXPECT_EQ(*values.begin(), 0) << EnumTable<E>::kOption;
  EXPECT_EQ(*values.rbegin(), n - 1) << EnumTable<E>::kOption << ": a value is missing";
  EXPECT_EQ(EnumNames<E>().size(), values.size());
}

TEST(OptionTables, EveryTableIsCompleteAndRoundTrips) {
  CheckTable<Mode>();
  CheckTable<Precision>();
  CheckTable<Optimizer>();
  CheckTable<Attention>();
  CheckTable<Loss>();
  CheckTable<StepKind>();
  CheckTable<AllocatorKind>();
  CheckTable<ParallelStrategy>();
  CheckTable<Switch>();
}

TEST(OptionTables, UnknownNamesAreErrorsListingTheKnownOnes) {
  auto p = ParseEnum<Precision>("fp8");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.message(), "unknown precision 'fp8' (fp32, amp_bf16, amp_fp16, bf16, fp16)");
  auto a = ParseEnum<Attention>("flash");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.message(), "unknown attention 'flash' (fused, eager)");
  EXPECT_FALSE(ParseEnum<Mode>("").ok());
  EXPECT_FALSE(ParseEnum<Loss>("MSE").ok());  // Names are exact.
}

TEST(OptionTables, NamesAsBeforeTheTables) {
  EXPECT_STREQ(PrecisionName(Precision::kAmpBf16), "amp_bf16");
  EXPECT_STREQ(OptimizerName(Optimizer::kAdamW), "adamw");
  EXPECT_STREQ(ModeName(Mode::kInference), "inference");
  EXPECT_STREQ(LossName(Loss::kCrossEntropy), "cross_entropy");
  EXPECT_STREQ(AttentionName(Attention::kEager), "eager");
  EXPECT_EQ(EnumNameList<StepKind>(), "steady, first");
}

}  // namespace
}  // namespace memplan
