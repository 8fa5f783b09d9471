#include "planner/rules.h"

#include "planner/checked.h"
#include "planner/ops/op_names.h"

namespace memplan {

RuleRef RuleOfMechanism(Mechanism m) {
  RuleRef r;
  r.name = MechanismName(m);
  r.evidence = MechanismEvidence(m);
  return r;
}

namespace {

// Whether one of the op's tensors has 2^31 elements or more.
bool HasTensorOverInt32(const Schedule& s, const ExecOp& op) {
  for (const std::vector<int>* vals : {&op.in, &op.out}) {
    for (int v : *vals) {
      if (v < 0) continue;
      int64_t n = 0;
      if (!CheckedNumel(s.vals[v].shape, &n) || n > kInt32IndexElements) return true;
    }
  }
  return false;
}

RuleRef RuleOfOpAtAnySize(const Schedule& s, const ExecOp& op) {
  const std::string& t = op.op_type;
  const size_t copy = t.find("(copy)");
  if (t == "Contiguous" || copy != std::string::npos) {
    return RuleOfMechanism(Mechanism::kContiguousCopy);
  }
  if (t == "BiasAdd") return RuleOfMechanism(Mechanism::kLinearBias);
  if ((t == op_names::kCast || t == "View") && op.node < 0) {
    // A view of a cached weight copy belongs to the cache.
    const bool cache = op.hold_to_forward_end || t == "View";
    return RuleOfMechanism(cache ? Mechanism::kAutocastWeightCache : Mechanism::kAutocastCast);
  }
  if (t == "ScaledDotProductAttention") {
    // Kernel selection depends on the heads and the mask (sdp_utils.cpp):
    // only the configuration the calibration measured is backed by it.
    const auto heads = [&](int i) -> int64_t {
      if (i >= static_cast<int>(op.in.size()) || op.in[i] < 0) return -1;
      const std::vector<int64_t>& sh = s.vals[op.in[i]].shape;
      return sh.size() >= 3 ? sh[sh.size() - 3] : -1;
    };
    if (heads(0) != heads(1)) return RuleOfMechanism(Mechanism::kSdpaGqa);
    if (op.in.size() > 3 && op.in[3] >= 0 && s.vals[op.in[3]].requires_grad) {
      return RuleOfMechanism(Mechanism::kSdpaMaskGrad);
    }
    return RuleOfMechanism(Mechanism::kSdpa);
  }
  RuleRef r;
  r.name = t;
  r.is_op = true;
  r.evidence = OpEvidence(t);
  return r;
}

}  // namespace

RuleRef RuleOfOp(const Schedule& s, const ExecOp& op) {
  RuleRef r = RuleOfOpAtAnySize(s, op);
  if (HasTensorOverInt32(s, op)) {
    // Kernels take other paths there (64-bit indexing, split iterations,
    // other cuDNN engines): measurements below are no evidence above.
    r.name += kOverInt32Suffix;
    if (!r.evidence.over_int32) r.evidence = Evidence{};
  }
  return r;
}

}  // namespace memplan
