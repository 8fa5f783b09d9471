// SDPA kernel selection: the filters by hand, and every row PyTorch 2.11
// measured on the H200 (bench/results/sdpa_probe_h200.jsonl).
#include "planner/sdpa.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace memplan {
namespace {

SdpaCall Call(DType dt, int64_t heads, int64_t kv_heads, SdpaMask mask) {
  SdpaCall c;
  c.dtype = dt;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.head_dim = c.value_head_dim = 64;
  c.q_len = c.kv_len = 2048;
  c.mask = mask;
  c.requires_grad = true;
  return c;
}

TEST(Sdpa, Fp32NeverFlash) {
  const SdpaCall c = Call(DType::kFloat, 32, 32, SdpaMask::kNone);
  EXPECT_FALSE(SdpaEligible(c).flash);
  EXPECT_FALSE(SdpaEligible(c).cudnn);
  EXPECT_EQ(SelectSdpaKernel(c), SdpaKernel::kMemEfficient);
}

TEST(Sdpa, Fp32GqaLeavesOnlyMath) {
  EXPECT_EQ(SelectSdpaKernel(Call(DType::kFloat, 32, 4, SdpaMask::kCausal)), SdpaKernel::kMath);
}

TEST(Sdpa, Bf16GqaRunsFlash) {
  EXPECT_EQ(SelectSdpaKernel(Call(DType::kBFloat16, 32, 4, SdpaMask::kCausal)), SdpaKernel::kFlash);
  EXPECT_EQ(SelectSdpaKernel(Call(DType::kBFloat16, 32, 4, SdpaMask::kCausal), true),
            SdpaKernel::kCudnn);
}

TEST(Sdpa, MaskThatRequiresGradRulesOutFlashAndCudnn) {
  SdpaCall c = Call(DType::kBFloat16, 8, 8, SdpaMask::kFloat);
  c.mask_requires_grad = true;
  EXPECT_EQ(SelectSdpaKernel(c, true), SdpaKernel::kMemEfficient);
  c.kv_heads = 2;  // and with GQA only math is left
  EXPECT_EQ(SelectSdpaKernel(c, true), SdpaKernel::kMath);
}

TEST(Sdpa, MaskWithStridedLastDimLeavesOnlyMath) {
  // T5's position bias: values.permute(2, 0, 1) puts the heads innermost.
  SdpaCall c = Call(DType::kBFloat16, 6, 6, SdpaMask::kFloat);
  c.mask_requires_grad = true;
  c.mask_last_dim_contiguous = false;
  EXPECT_EQ(SelectSdpaKernel(c, true), SdpaKernel::kMath);
}

TEST(Sdpa, HeadDimLimits) {
  SdpaCall c = Call(DType::kBFloat16, 8, 8, SdpaMask::kNone);
  c.head_dim = c.value_head_dim = 256;
  EXPECT_TRUE(SdpaEligible(c).flash);
  EXPECT_FALSE(SdpaEligible(c).cudnn);
  c.head_dim = c.value_head_dim = 264;
  EXPECT_FALSE(SdpaEligible(c).flash);
  EXPECT_TRUE(SdpaEligible(c).mem_efficient);  // 264 % 8 == 0
  c.head_dim = c.value_head_dim = 60;          // not a multiple of 8 for half
  EXPECT_TRUE(SdpaEligible(c).flash);
  EXPECT_FALSE(SdpaEligible(c).mem_efficient);
  c.dtype = DType::kFloat;  // fp32 needs a multiple of 4
  EXPECT_TRUE(SdpaEligible(c).mem_efficient);
}

TEST(Sdpa, CausalFlashNeedsSquareScores) {
  SdpaCall c = Call(DType::kBFloat16, 8, 8, SdpaMask::kCausal);
  c.kv_len = 4096;
  EXPECT_FALSE(SdpaEligible(c).flash);
  EXPECT_EQ(SelectSdpaKernel(c), SdpaKernel::kMemEfficient);
}

TEST(Sdpa, CudnnDropoutResolution) {
  SdpaCall c = Call(DType::kBFloat16, 8, 8, SdpaMask::kNone);
  c.dropout = 0.125;  // 2/16
  EXPECT_TRUE(SdpaEligible(c).cudnn);
  c.dropout = 0.1;
  EXPECT_FALSE(SdpaEligible(c).cudnn);
  EXPECT_TRUE(SdpaEligible(c).flash);
}

// The value of "key": ... in a JSON line (a number, string, null or bool).
std::string Field(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\": ";
  const size_t at = line.find(k);
  if (at == std::string::npos) return "";
  size_t b = at + k.size();
  size_t e = b;
  if (line[b] == '"') {
    e = line.find('"', b + 1);
    return line.substr(b + 1, e - b - 1);
  }
  while (e < line.size() && line[e] != ',' && line[e] != '}') ++e;
  return line.substr(b, e - b);
}

// Each row: which backends accept the call, and what the kernel PyTorch
// picked kept after the forward (a fused kernel keeps out + logsumexp; math
// keeps the S x S probabilities, half of SxS_per_head_mib or more).
TEST(Sdpa, AgreesWithEveryH200ProbeRow) {
  std::ifstream in(std::string(MEMPLAN_BENCH_RESULTS_DIR) + "/sdpa_probe_h200.jsonl");
  ASSERT_TRUE(in.good());
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    ++rows;
    const std::string dt = Field(line, "dtype");
    const std::string mask = Field(line, "mask");
    SdpaCall c =
        Call(dt == "torch.float32" ? DType::kFloat : DType::kBFloat16,
             std::stoll(Field(line, "heads")), std::stoll(Field(line, "kv_heads")),
             mask == "causal" ? SdpaMask::kCausal
                              : (mask == "float_grad" ? SdpaMask::kFloat : SdpaMask::kNone));
    c.mask_requires_grad = mask == "float_grad";
    const SdpaEligibility e = SdpaEligible(c);
    SCOPED_TRACE(line);
    EXPECT_EQ(e.flash, Field(line, "FLASH_ATTENTION") == "true");
    EXPECT_EQ(e.mem_efficient, Field(line, "EFFICIENT_ATTENTION") == "true");
    EXPECT_EQ(e.cudnn, Field(line, "CUDNN_ATTENTION") == "true");
    EXPECT_EQ(e.math, Field(line, "MATH") == "true");
    const bool measured_math = std::stod(Field(line, "kept_after_fwd_mib")) >=
                               0.5 * std::stod(Field(line, "SxS_per_head_mib"));
    for (bool cudnn_first : {false, true}) {
      EXPECT_EQ(SelectSdpaKernel(c, cudnn_first) == SdpaKernel::kMath, measured_math);
    }
  }
  EXPECT_EQ(rows, 12);
}

}  // namespace
}  // namespace memplan
