#include "planner/devices.h"

#include <gtest/gtest.h>

#include <set>

#include "planner/plan.h"

namespace memplan {
namespace {

TEST(Devices, TableHasTheRequiredPresetsWithSaneNumbers) {
  for (const char* n : {"h200", "h100-sxm", "h100-pcie", "a100-40gb", "a100-80gb", "l40s", "l4",
                        "a10g", "rtx-4090", "rtx-3090", "v100-16gb", "v100-32gb", "t4"}) {
    const DevicePreset* d = FindDevice(n);
    ASSERT_NE(d, nullptr) << n;
    EXPECT_EQ(d->name, n);
    EXPECT_GE(d->memory_bytes, 15LL << 30) << n;
    EXPECT_GE(d->context_bytes, 512LL << 20) << n;
    EXPECT_LE(d->context_bytes, 820LL << 20) << n;
    EXPECT_GT(d->fp16_flops, d->fp32_flops) << n;
    EXPECT_GT(d->mem_bandwidth, 1e11) << n;
    EXPECT_FALSE(d->source.empty()) << n;
  }
}

// What CUDA gets is below the marketing size ("24 GB" read as GiB): the
// issue's L4, A10G (22.5 GiB) and L40S (45 GiB) as nvidia-smi shows them.
TEST(Devices, MemoryIsWhatTheCardOffersNotTheMarketingSize) {
  const std::pair<const char*, int64_t> nominal_gib[] = {
      {"h200", 141},     {"h100-sxm", 80},  {"h100-pcie", 80}, {"a100-40gb", 40}, {"a100-80gb", 80},
      {"l40s", 48},      {"l4", 24},        {"a10g", 24},      {"rtx-4090", 24},  {"rtx-3090", 24},
      {"v100-16gb", 16}, {"v100-32gb", 32}, {"t4", 16}};
  for (const auto& [name, gib] : nominal_gib) {
    const DevicePreset* d = FindDevice(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_LE(d->memory_bytes, gib << 30) << name;
  }
  EXPECT_LT(FindDevice("l4")->memory_bytes, (45LL << 30) / 2);  // 22.5 GiB
  EXPECT_LT(FindDevice("a10g")->memory_bytes, (45LL << 30) / 2);
  EXPECT_LE(FindDevice("l40s")->memory_bytes, 45LL << 30);
  EXPECT_EQ(FindDevice("h100-sxm")->memory_bytes, 81559LL << 20);
}

TEST(Devices, NamesAndAliasesAreUnique) {
  std::set<std::string> seen;
  for (const DevicePreset& d : ListDevices()) {
    EXPECT_TRUE(seen.insert(d.name).second) << d.name;
    for (const std::string& a : d.aliases) EXPECT_TRUE(seen.insert(a).second) << a;
  }
}

TEST(Devices, FindIsCaseInsensitiveAndKnowsAliases) {
  EXPECT_EQ(FindDevice("H100-80GB")->name, "h100-sxm");
  EXPECT_EQ(FindDevice("h100_sxm")->name, "h100-sxm");
  EXPECT_EQ(FindDevice("A100-40GB")->name, "a100-40gb");
  EXPECT_EQ(FindDevice("a100")->name, "a100-80gb");
  EXPECT_EQ(FindDevice("NVIDIA GeForce RTX 4090")->name, "rtx-4090");
  EXPECT_EQ(FindDevice("Tesla T4")->name, "t4");
  EXPECT_EQ(FindDevice("nope"), nullptr);
  EXPECT_EQ(FindDevice(""), nullptr);
}

TEST(Devices, H200IsTheMeasuredOne) {
  const DevicePreset* d = FindDevice("h200");
  EXPECT_EQ(d->memory_bytes, 150109880320LL);
  EXPECT_EQ(d->context_bytes, kDefaultContextBytes);
  EXPECT_TRUE(d->context_measured);
}

TEST(Devices, MatchesProbedNamesByNameAndMemory) {
  const int64_t g = 1LL << 30;
  EXPECT_EQ(MatchProbedDevice("NVIDIA H200", 150109880320LL)->name, "h200");
  EXPECT_EQ(MatchProbedDevice("NVIDIA H100 80GB HBM3", 85520809984LL)->name, "h100-sxm");
  EXPECT_EQ(MatchProbedDevice("NVIDIA H100 PCIe", 85 * g)->name, "h100-pcie");
  EXPECT_EQ(MatchProbedDevice("NVIDIA A100-SXM4-40GB", 40 * g)->name, "a100-40gb");
  EXPECT_EQ(MatchProbedDevice("NVIDIA A100 80GB PCIe", 80 * g)->name, "a100-80gb");
  EXPECT_EQ(MatchProbedDevice("Tesla V100-SXM2-32GB", 32 * g)->name, "v100-32gb");
  EXPECT_EQ(MatchProbedDevice("Tesla V100-SXM2-16GB", 16 * g)->name, "v100-16gb");
  EXPECT_EQ(MatchProbedDevice("NVIDIA L40S", 46068LL << 20)->name, "l40s");
  EXPECT_EQ(MatchProbedDevice("NVIDIA L4", 23034LL << 20)->name, "l4");
  // The memory disagrees: no preset rather than a wrong one.
  EXPECT_EQ(MatchProbedDevice("NVIDIA L4", 80 * g), nullptr);
  EXPECT_EQ(MatchProbedDevice("NVIDIA B200", 180 * g), nullptr);
}

TEST(Devices, PeakFlopsFollowThePrecision) {
  const DevicePreset* h = FindDevice("h100-sxm");
  EXPECT_EQ(PeakFlops(*h, Precision::kAmpBf16), h->bf16_flops);
  EXPECT_EQ(PeakFlops(*h, Precision::kFp16), h->fp16_flops);
  EXPECT_EQ(PeakFlops(*h, Precision::kFp32), h->fp32_flops);
  EXPECT_EQ(PeakFlops(*FindDevice("v100"), Precision::kAmpBf16), 0.0);
  EXPECT_EQ(PeakFlops(*FindDevice("t4"), Precision::kBf16), 0.0);
}

}  // namespace
}  // namespace memplan
