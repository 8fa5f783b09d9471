// `memplan advise`: the largest batch that fits a budget, the precision and
// the checkpoint placement, ranked by estimated throughput.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/escape.h"
#include "cli/format.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "cli/report.h"
#include "gpu_probe/gpu_probe.h"
#include "planner/advisor.h"
#include "planner/devices.h"

namespace memplan {
namespace {

/// The most nodes advise searches without --max-nodes: a MatMul+Add+Relu
/// chain of this size takes about 10 CPU-s here (README: Large graphs and
/// the advisor).
constexpr int64_t kAdviseMaxNodes = 20000;

struct AdviseArgs {
  std::string model;
  std::vector<std::string> dims;
  std::string batch_dim;
  int64_t max_nodes = -1;  ///< -1: not given (kDefaultMaxNodes, and kAdviseMaxNodes checked).
  std::string budget;
  std::string device;
  std::string precision = "any";
  PlanFlags plan;  ///< The plan flags advise shares (optimizer, attention, loss, allocator).
  std::string checkpoint = "auto";
  int64_t global_batch = 0;
  std::string margin = "5";
  std::string reserve;
  int64_t max_batch = 65536;
  int alternatives = 3;
  int threads = 0;
  std::string search = "replay";
  std::string format;
};

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Py(bool b) { return b ? "True" : "False"; }

/// Python to paste into a training loop for candidate `c`.
std::string Snippet(const Candidate& c, const AdviseRequest& r, const BlockChain& chain) {
  std::ostringstream os;
  const Precision p = c.precision;
  const bool amp = p == Precision::kAmpBf16 || p == Precision::kAmpFp16;
  const bool fp16 = p == Precision::kAmpFp16;
  const char* dtype =
      (p == Precision::kAmpBf16 || p == Precision::kBf16) ? "torch.bfloat16" : "torch.float16";
  const DistOptions& dist = c.plan.options.dist;
  const ParallelStrategy st = dist.strategy;
  const bool ddp = st == ParallelStrategy::kDdp;
  const bool fsdp = st == ParallelStrategy::kFsdp;
  const bool zero = st == ParallelStrategy::kZero1 || st == ParallelStrategy::kZero2 ||
                    st == ParallelStrategy::kZero3;
  const bool several = st != ParallelStrategy::kSingle;
  if (several) {
    os << "# Launch: " << (zero ? "deepspeed --num_gpus " : "torchrun --nproc_per_node=")
       << dist.world_size << " train.py   (one process per GPU)\n";
    os << "import contextlib\nimport os\n";
  }
  os << "import torch\n";
  if (several) os << "import torch.distributed as dist\n";
  if (ddp) os << "from torch.nn.parallel import DistributedDataParallel as DDP\n";
  if (fsdp) os << "from torch.distributed.fsdp import fully_shard\n";
  if (zero) os << "import deepspeed\n";
  if (!c.checkpoint.empty()) os << "from torch.utils.checkpoint import checkpoint\n";
  os << "\n# memplan advise: " << PrecisionName(p) << ", batch " << c.micro_batch;
  if (!c.checkpoint.empty()) os << ", " << c.checkpoint.size() << " checkpointed modules";
  if (several) os << ", " << EnumName(st) << " on " << dist.world_size << " GPUs";
  os << "\nBATCH_SIZE = " << c.micro_batch << (several ? "  # per GPU" : "") << "\n";
  os << "ACCUM_STEPS = " << c.grad_accumulation_steps;
  if (r.global_batch > 0) {
    os << "  # " << c.micro_batch << " x " << c.grad_accumulation_steps << " = "
       << c.micro_batch * c.grad_accumulation_steps;
    if (several) {
      os << " per GPU, x " << dist.world_size
         << " GPUs = " << c.micro_batch * c.grad_accumulation_steps * dist.world_size;
    }
    os << " samples per optimizer step (asked " << r.global_batch << ")";
  }
  os << "\n\n";
  if (!c.checkpoint.empty()) {
    if (c.checkpoint.size() == chain.blocks.size()) {
      os << "# Every block is recomputed. For a Hugging Face PreTrainedModel this is the same as\n"
         << "#   "
            "hf_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={\"use_"
            "reentrant\": "
            "False})\n";
    }
    os << "CHECKPOINT = [\n";
    // Module names come from the model: each one a Python string literal,
    // never raw text in the code.
    for (const std::string& m : c.checkpoint) os << "    " << PythonString(m) << ",\n";
    os << "]\n\n"
       << "def _recompute_in_backward(module):\n"
       << "    forward = module.forward\n"
       << "    def wrapped(*args, **kwargs):\n"
       << "        return checkpoint(forward, *args, use_reentrant=False, **kwargs)\n"
       << "    module.forward = wrapped\n\n"
       << "# `model` is the module that was exported to ONNX (the names are its submodules).\n"
       << "for name in CHECKPOINT:\n"
       << "    _recompute_in_backward(model.get_submodule(name))\n\n";
  }
  if (several) {
    os << (zero ? "deepspeed.init_distributed(\"nccl\")\n" : "dist.init_process_group(\"nccl\")\n")
       << "local_rank = int(os.environ[\"LOCAL_RANK\"])\n"
       << "torch.cuda.set_device(local_rank)\n";
  }
  os << "model = model.cuda().train()\n";
  if (p == Precision::kBf16 || p == Precision::kFp16) os << "model = model.to(" << dtype << ")\n";
  if (ddp) {
    os << "model = DDP(model, device_ids=[local_rank])  # bucket_cap_mb=25, as planned\n";
  }
  if (fsdp) {
    os << "# fully_shard per unit, then the root (the units as the export names them).\n"
       << "FSDP_UNITS = [\n";
    for (const std::string& m : c.plan.rank.unit_modules) os << "    " << PythonString(m) << ",\n";
    os << "]\n"
       << "for name in FSDP_UNITS:\n"
       << "    fully_shard(model.get_submodule(name), reshard_after_forward="
       << Py(dist.reshard_after_forward) << ")\n"
       << "fully_shard(model)\n";
  }
  switch (r.base.optimizer) {
    case Optimizer::kSgd:
      os << "optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)\n";
      break;
    case Optimizer::kMomentum:
      os << "optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)\n";
      break;
    case Optimizer::kAdam:
      os << "optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)\n";
      break;
    case Optimizer::kAdamW:
      os << "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)\n";
      break;
  }
  if (zero) {
    const int stage = st == ParallelStrategy::kZero1 ? 1 : st == ParallelStrategy::kZero2 ? 2 : 3;
    os << "model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, "
          "config={\n"
       << "    \"train_micro_batch_size_per_gpu\": BATCH_SIZE,\n"
       << "    \"gradient_accumulation_steps\": ACCUM_STEPS,\n"
       << "    \"zero_optimization\": {\"stage\": " << stage << "},\n";
    if (p == Precision::kAmpBf16) os << "    \"bf16\": {\"enabled\": True},\n";
    os << "})\n";
  }
  if (fp16 && !zero) os << "scaler = torch.amp.GradScaler(\"cuda\")\n";
  if (several) {
    os << "sampler = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=True)\n"
       << "loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler, "
          "drop_last=True)\n\n";
  } else {
    os << "loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True, "
          "drop_last=True)\n\n";
  }
  os << "for i, (x, y) in enumerate(loader):\n"
     << "    x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)\n";
  if (zero) {
    os << "    loss = loss_fn(model(x), y)\n"
       << "    model.backward(loss)  # DeepSpeed scales by ACCUM_STEPS itself\n"
       << "    model.step()  # steps the optimizer every ACCUM_STEPS micro-batches\n";
    return os.str();
  }
  if (ddp) {
    os << "    # Gradients are all-reduced only on the last micro-batch of a step.\n"
       << "    sync = (i + 1) % ACCUM_STEPS == 0\n"
       << "    with contextlib.nullcontext() if sync else model.no_sync():\n";
    std::ostringstream body;
    if (amp) {
      body << "    with torch.autocast(\"cuda\", dtype=" << dtype << "):\n"
           << "        loss = loss_fn(model(x), y) / ACCUM_STEPS\n";
    } else {
      body << "    loss = loss_fn(model(x), y) / ACCUM_STEPS\n";
    }
    body << (fp16 ? "    scaler.scale(loss).backward()\n" : "    loss.backward()\n");
    std::istringstream lines(body.str());
    std::string l;
    while (std::getline(lines, l)) os << "    " << l << "\n";
    os << "    if sync:\n";
    if (fp16) {
      os << "        scaler.step(optimizer)\n        scaler.update()\n";
    } else {
      os << "        optimizer.step()\n";
    }
    os << "        optimizer.zero_grad(set_to_none=True)\n";
    return os.str();
  }
  if (amp) {
    os << "    with torch.autocast(\"cuda\", dtype=" << dtype << "):\n"
       << "        loss = loss_fn(model(x), y) / ACCUM_STEPS\n";
  } else {
    os << "    loss = loss_fn(model(x), y) / ACCUM_STEPS\n";
  }
  os << (fp16 ? "    scaler.scale(loss).backward()\n" : "    loss.backward()\n")
     << "    if (i + 1) % ACCUM_STEPS == 0:\n";
  if (fp16) {
    os << "        scaler.step(optimizer)\n        scaler.update()\n";
  } else {
    os << "        optimizer.step()\n";
  }
  os << "        optimizer.zero_grad(set_to_none=True)\n";
  (void)Py;
  return os.str();
}

std::string CheckpointSummary(const std::vector<std::string>& m, const BlockChain& chain) {
  if (m.empty()) return "none";
  if (m.size() == chain.blocks.size() && m.size() > 1) {
    return "all " + std::to_string(m.size()) + " blocks (" + m.front() + " .. " + m.back() + ")";
  }
  std::string s = std::to_string(m.size()) + " of " + std::to_string(chain.blocks.size()) + ": ";
  for (size_t i = 0; i < m.size(); ++i) s += (i ? ", " : "") + m[i];
  return s;
}

std::string ShortCheckpoint(const Candidate& c, const BlockChain& chain) {
  if (c.checkpoint.empty()) return "none";
  return std::string(StrategyName(c.strategy)) + " (" + std::to_string(c.checkpoint.size()) + "/" +
         std::to_string(chain.blocks.size()) + ")";
}

nlohmann::json CandidateJson(const Candidate& c, const AdviseRequest& r, const BlockChain& chain,
                             bool with_snippet) {
  nlohmann::json j;
  j["batch"] = c.micro_batch;
  j["max_batch"] = c.batch;
  j["precision"] = PrecisionName(c.precision);
  j["placement"] = StrategyName(c.strategy);
  if (c.plan.options.dist.strategy != ParallelStrategy::kSingle || r.world_size > 1) {
    j["strategy"] = EnumName(c.plan.options.dist.strategy);
    j["world_size"] = c.plan.options.dist.world_size;
    j["rank"] = RankJson(c.plan);
  }
  j["checkpoint"] = c.checkpoint;
  j["peak"] = {{"allocated_bytes", c.plan.peak.allocated_bytes},
               {"reserved_bytes", c.device_bytes - r.context_bytes - c.plan.rank.nccl_bytes},
               {"device_bytes", c.device_bytes},
               {"context_bytes", r.context_bytes},
               {"headroom_bytes", c.headroom_bytes}};
  j["samples_per_second"] = c.speed.samples_per_s;
  j["step_seconds"] = c.speed.step_s;
  j["flops"] = {{"forward", c.plan.forward_flops},
                {"backward", c.plan.backward_flops},
                {"recompute", c.plan.recompute_flops}};
  j["recompute_overhead"] = c.recompute_overhead;
  j["grad_accumulation_steps"] = c.grad_accumulation_steps;
  j["plans"] = c.probes;
  j["replays"] = c.replays;
  if (!c.note.empty()) j["note"] = c.note;
  if (with_snippet) j["snippet"] = Snippet(c, r, chain);
  return j;
}

struct Context {
  std::string model;
  std::string device_label;  ///< "" when only --budget.
  bool speed_reference = false;
  std::vector<std::string> warnings;  ///< About the model (ModelWarnings).
};

nlohmann::json AdviceJson(const Context& ctx, const Advice& a, const AdviseRequest& r) {
  nlohmann::json j;
  j["model"] = ctx.model;
  j["budget"] = {
      {"budget_bytes", r.budget_bytes},
      {"margin", r.margin},
      {"usable_bytes", a.usable_bytes},
      {"context_bytes", r.context_bytes},
      {"device", ctx.device_label.empty() ? nlohmann::json() : nlohmann::json(ctx.device_label)}};
  j["speed_device"] = r.device.name;
  nlohmann::json mods = nlohmann::json::array();
  for (const Block& b : a.blocks.blocks) mods.push_back(b.module);
  j["blocks"] = {{"pattern", a.blocks.pattern}, {"modules", mods}};
  j["recommendation"] =
      a.ranked.empty() ? nlohmann::json() : CandidateJson(a.ranked.front(), r, a.blocks, true);
  j["alternatives"] = nlohmann::json::array();
  for (size_t i = 1; i < a.ranked.size(); ++i) {
    j["alternatives"].push_back(CandidateJson(a.ranked[i], r, a.blocks, false));
  }
  j["not_fitting"] = nlohmann::json::array();
  for (const Candidate& c : a.failing) {
    j["not_fitting"].push_back({{"strategy", EnumName(c.plan.options.dist.strategy)},
                                {"precision", PrecisionName(c.precision)},
                                {"placement", StrategyName(c.strategy)},
                                {"batch1_device_bytes", c.device_bytes}});
  }
  j["notes"] = a.notes;
  j["warnings"] = ctx.warnings;
  j["plans"] = a.plans;
  j["replays"] = a.replays;
  return j;
}

std::vector<std::vector<std::string>> AlternativeRows(const Advice& a, size_t n) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < a.ranked.size() && i <= n; ++i) {
    const Candidate& c = a.ranked[i];
    std::string precision = PrecisionName(c.precision);
    if (c.plan.options.dist.strategy != ParallelStrategy::kSingle) {
      precision = std::string(EnumName(c.plan.options.dist.strategy)) + " " + precision;
    }
    rows.push_back({std::to_string(i + 1), precision, ShortCheckpoint(c, a.blocks),
                    std::to_string(c.micro_batch), FormatBytes(c.device_bytes),
                    FormatBytes(c.headroom_bytes), Fixed(c.speed.samples_per_s, 1),
                    Fixed(100 * c.recompute_overhead, 1) + " %"});
  }
  return rows;
}

const std::vector<std::string> kAltHeader = {"#",      "precision", "checkpoint", "batch",
                                             "device", "headroom",  "samples/s",  "recompute"};

std::string Header(const Context& ctx, const Advice& a, const AdviseRequest& r) {
  std::ostringstream os;
  os << "budget " << FormatBytes(r.budget_bytes);
  if (!ctx.device_label.empty()) os << " (" << ctx.device_label << ")";
  os << ", margin " << Fixed(100 * r.margin, 1) << " % -> usable " << FormatBytes(a.usable_bytes)
     << ", context " << FormatBytes(r.context_bytes) << "; " << OptimizerName(r.base.optimizer)
     << ", " << AttentionName(r.base.attention) << " attention";
  return os.str();
}

std::string SpeedLine(const Candidate& c, const Context& ctx, const AdviseRequest& r) {
  std::ostringstream os;
  os << Fixed(c.speed.samples_per_s, 1) << " samples/s (step " << Fixed(1e3 * c.speed.step_s, 1)
     << " ms, " << (c.speed.compute_s >= c.speed.memory_s ? "compute" : "memory") << "-bound, on "
     << r.device.display << (ctx.speed_reference ? ", a reference" : "") << ")";
  return os.str();
}

std::string Table(const Context& ctx, const Advice& a, const AdviseRequest& r, size_t n_alt) {
  std::ostringstream os;
  os << ctx.model << "  advise\n  " << Header(ctx, a, r) << "\n";
  if (!a.blocks.blocks.empty()) {
    os << "  checkpointable blocks: " << a.blocks.blocks.size() << " x " << a.blocks.pattern
       << "\n";
  }
  os << "\n";
  if (a.ranked.empty()) {
    os << "  nothing fits: even batch 1 needs more than " << FormatBytes(a.usable_bytes) << "\n";
    for (const Candidate& c : a.failing) {
      os << "    " << PrecisionName(c.precision) << " " << ShortCheckpoint(c, a.blocks)
         << ": batch 1 needs " << FormatBytes(c.device_bytes) << "\n";
    }
  } else {
    const Candidate& c = a.ranked.front();
    char line[512];
    auto row = [&](const char* k, const std::string& v) {
      std::snprintf(line, sizeof line, "  %-20s %s\n", k, v.c_str());
      os << line;
    };
    os << "Recommendation\n";
    std::string batch = std::to_string(c.micro_batch);
    if (c.micro_batch != c.batch) batch += " (largest that fits: " + std::to_string(c.batch) + ")";
    row("batch", batch);
    if (r.global_batch > 0) {
      const int64_t steps = c.grad_accumulation_steps;
      row("grad accumulation",
          (steps == 1 ? std::string("none") : std::to_string(steps) + " steps") + " (global " +
              std::to_string(c.micro_batch * steps) + ", asked " + std::to_string(r.global_batch) +
              ")");
    }
    const DistOptions& dist = c.plan.options.dist;
    if (dist.strategy != ParallelStrategy::kSingle || r.world_size > 1) {
      row("strategy", std::string(EnumName(dist.strategy)) + " on " +
                          std::to_string(dist.world_size) + " GPU" +
                          (dist.world_size > 1 ? "s" : "") + " (batch and peaks per GPU)");
    }
    row("precision", PrecisionName(c.precision));
    row("checkpoint", CheckpointSummary(c.checkpoint, a.blocks));
    row("peak allocated", FormatBytes(c.plan.peak.allocated_bytes));
    row("peak reserved", FormatBytes(c.device_bytes - r.context_bytes - c.plan.rank.nccl_bytes));
    row("device peak",
        FormatBytes(c.device_bytes) + (c.plan.rank.nccl_bytes > 0 ? " (reserved + context + NCCL)"
                                                                  : " (reserved + context)"));
    row("headroom", FormatBytes(c.headroom_bytes) + " of " + FormatBytes(r.budget_bytes));
    row("throughput (est.)", SpeedLine(c, ctx, r));
    row("recompute overhead",
        Fixed(100 * c.recompute_overhead, 1) + " % of forward+backward FLOPs");
    if (a.ranked.size() > 1) {
      os << "\nCandidates (ranked by estimated samples/s; #1 is the recommendation)\n";
      auto rows = AlternativeRows(a, n_alt);
      std::vector<size_t> w(kAltHeader.size());
      for (size_t k = 0; k < w.size(); ++k) {
        w[k] = kAltHeader[k].size();
        for (const auto& rr : rows) w[k] = std::max(w[k], rr[k].size());
      }
      auto print = [&](const std::vector<std::string>& cells) {
        os << " ";
        for (size_t k = 0; k < cells.size(); ++k) {
          const bool left = k == 1 || k == 2;
          os << " "
             << (left ? cells[k] + std::string(w[k] - cells[k].size(), ' ')
                      : std::string(w[k] - cells[k].size(), ' ') + cells[k]);
        }
        os << "\n";
      };
      print(kAltHeader);
      for (const auto& rr : rows) print(rr);
    }
    os << "\nPyTorch\n";
    std::istringstream snip(Snippet(c, r, a.blocks));
    std::string l;
    while (std::getline(snip, l)) os << (l.empty() ? "" : "    ") << l << "\n";
  }
  for (const std::string& n : a.notes) os << "\nnote: " << n;
  for (const std::string& w : ctx.warnings) os << "\nwarning: " << w;
  if (!a.notes.empty() || !ctx.warnings.empty()) os << "\n";
  return os.str();
}

std::string Markdown(const Context& ctx, const Advice& a, const AdviseRequest& r, size_t n_alt) {
  std::ostringstream os;
  os << "## memplan advise: " << MarkdownText(ctx.model) << "\n\n"
     << MarkdownText(Header(ctx, a, r), 1000) << "\n\n";
  if (a.ranked.empty()) {
    os << "**Nothing fits**: even batch 1 needs more than " << FormatBytes(a.usable_bytes) << ".\n";
  } else {
    const Candidate& c = a.ranked.front();
    std::vector<std::vector<std::string>> rows = {
        {"batch",
         std::to_string(c.micro_batch) +
             (c.micro_batch != c.batch ? " (largest: " + std::to_string(c.batch) + ")" : "")},
        {"precision", PrecisionName(c.precision)},
        {"checkpoint", CheckpointSummary(c.checkpoint, a.blocks)},
        {"peak allocated", FormatBytes(c.plan.peak.allocated_bytes)},
        {"peak reserved", FormatBytes(c.device_bytes - r.context_bytes - c.plan.rank.nccl_bytes)},
        {"device peak", FormatBytes(c.device_bytes)},
        {"headroom", FormatBytes(c.headroom_bytes)},
        {"throughput (est.)", SpeedLine(c, ctx, r)},
        {"recompute overhead", Fixed(100 * c.recompute_overhead, 1) + " %"},
        {"grad accumulation steps", std::to_string(c.grad_accumulation_steps)}};
    if (c.plan.options.dist.strategy != ParallelStrategy::kSingle) {
      rows.insert(
          rows.begin(),
          {"strategy", std::string(EnumName(c.plan.options.dist.strategy)) + " on " +
                           std::to_string(c.plan.options.dist.world_size) + " GPUs (per GPU)"});
    }
    os << "### Recommendation\n\n" << MarkdownTable({"", "value"}, rows) << "\n";
    if (a.ranked.size() > 1) {
      os << "### Alternatives\n\n"
         << MarkdownTable(kAltHeader, AlternativeRows(a, n_alt),
                          {true, false, false, true, true, true, true, true})
         << "\n";
    }
    os << "### PyTorch\n\n```python\n" << Snippet(c, r, a.blocks) << "```\n";
  }
  for (const std::string& n : a.notes) os << "\n> note: " << MarkdownText(n, 1000) << "\n";
  for (const std::string& w : ctx.warnings) {
    os << "\n> warning: " << MarkdownText(w, 1000) << "\n";
  }
  return os.str();
}

int RunAdvise(const AdviseArgs& args) {
  if (args.budget.empty() && args.device.empty()) {
    return Fail("advise needs --budget SIZE or --device NAME|auto");
  }
  AdviseRequest r;
  Context ctx;
  ctx.model = args.model;
  const DevicePreset* preset = nullptr;
  int64_t probed_context = -1;
  if (args.device == "auto") {
    if (!GpuSupportBuilt()) {
      std::cerr << "memplan: error: --device auto needs a GPU build: " << kNoCudaBuildMessage
                << " (or pass --device NAME or --budget SIZE)\n";
      return kExitGpu;
    }
    auto devices = ProbeDevices();
    if (!devices.ok() || devices->empty()) {
      std::cerr << "memplan: error: --device auto: "
                << (devices.ok() ? "no CUDA device found" : devices.message()) << "\n";
      return kExitGpu;
    }
    const DeviceInfo& d = devices->front();
    preset = MatchProbedDevice(d.name, d.total_bytes);
    if (preset != nullptr) {
      r.device = *preset;
    } else {
      // Unknown part: its memory and bandwidth as probed, the H100's compute
      // rates as a reference for ranking.
      r.device = *FindDevice("h100-sxm");
      r.device.name = d.name;
      r.device.display = d.name;
      if (d.mem_bandwidth_gbs > 0) r.device.mem_bandwidth = d.mem_bandwidth_gbs * 1e9;
      ctx.speed_reference = true;
    }
    r.device.memory_bytes = d.total_bytes;
    probed_context = d.context_bytes;
    ctx.device_label = d.name + std::string(" (probed)");
  } else if (!args.device.empty()) {
    preset = FindDevice(args.device);
    if (preset == nullptr) {
      std::string names;
      for (const DevicePreset& d : ListDevices()) names += (names.empty() ? "" : ", ") + d.name;
      return Fail("--device '" + args.device + "': unknown device (known: " + names + ", auto)");
    }
    r.device = *preset;
    ctx.device_label = preset->display;
  } else {
    r.device = *FindDevice("h100-sxm");
    ctx.speed_reference = true;
  }
  if (!args.budget.empty()) {
    auto b = ParseSize(args.budget);
    if (!b.ok()) return Fail("--budget: " + b.message());
    if (b.value() <= 0) return Fail("--budget must be positive");
    r.budget_bytes = b.value();
  } else {
    r.budget_bytes = r.device.memory_bytes;
  }
  if (!args.reserve.empty()) {
    auto c = ParseSize(args.reserve);
    if (!c.ok()) return Fail("--reserve: " + c.message());
    r.context_bytes = c.value();
  } else if (preset != nullptr) {
    r.context_bytes = std::max<int64_t>(preset->context_bytes, probed_context);
  } else if (probed_context >= 0) {
    r.context_bytes = probed_context;
  } else {
    r.context_bytes = kDefaultContextBytes;
  }
  auto margin = ParsePercent("--margin", args.margin);
  if (!margin.ok()) return Fail(margin.message());
  r.margin = margin.value();
  auto precisions = ParsePrecisionList(args.precision);
  if (!precisions.ok()) return Fail(precisions.message());
  r.precisions = precisions.value();
  // Several GPUs: every strategy is searched unless --strategy names one;
  // the flags are checked as fsdp (which takes them all) in that case.
  PlanFlags flags = args.plan;
  const bool search_strategies = flags.strategy.empty() && flags.world_size > 1;
  if (search_strategies) flags.strategy = "fsdp";
  auto options = ToPlanOptions(flags);
  if (!options.ok()) return Fail(options.message());
  r.base = options.value();
  Status load = CheckModelLoad(r.base, r.precisions);
  if (!load.ok()) return Fail(load.message());
  r.world_size = r.base.dist.world_size;
  if (search_strategies) {
    r.strategies = {ParallelStrategy::kDdp, ParallelStrategy::kFsdp, ParallelStrategy::kZero1,
                    ParallelStrategy::kZero2, ParallelStrategy::kZero3};
  } else if (r.base.dist.strategy != ParallelStrategy::kSingle) {
    r.strategies = {r.base.dist.strategy};
  }
  // A quantized base computes in its half dtype (QLoRA: model.to(bfloat16),
  // Linear4bit compute_dtype bfloat16): "any" means the whole-model casts.
  if (args.precision == "any" && r.base.weights != WeightFormat::kNative) {
    r.precisions = {Precision::kBf16, Precision::kFp16};
  }
  r.checkpoint = args.checkpoint == "auto";
  // Bounded so that micro-batch x steps cannot overflow.
  constexpr int64_t kMaxGlobalBatch = int64_t{1} << 40;
  if (args.global_batch < 0 || args.global_batch > kMaxGlobalBatch) {
    return Fail("--global-batch " + std::to_string(args.global_batch) + ": must be from 1 to " +
                std::to_string(kMaxGlobalBatch));
  }
  r.global_batch = args.global_batch;
  if (args.max_batch < 1) return Fail("--max-batch must be positive");
  if (args.alternatives < 0) return Fail("--alternatives must be 0 or more");
  if (args.threads < 0) return Fail("--threads must be 0 (one per core) or more");
  r.threads = args.threads;
  r.max_batch = std::min<int64_t>(args.max_batch, 65536);
  auto search = ParseEnum<BatchSearchKind>(args.search);
  if (!search.ok()) return Fail("--search: " + search.message());
  r.search = search.value();
  ModelFlags mf;
  mf.model = args.model;
  mf.dims = args.dims;
  mf.batch_dim = args.batch_dim;
  auto bindings = ToBindings(mf);
  if (!bindings.ok()) return Fail(bindings.message());
  r.bindings = bindings.value();
  auto g = LoadGraph(args.model, args.max_nodes > 0 ? args.max_nodes : kDefaultMaxNodes);
  if (!g.ok()) return Fail(g.message());
  if (args.max_nodes < 0 && static_cast<int64_t>(g->nodes.size()) > kAdviseMaxNodes) {
    return Fail(args.model + ": --max-nodes: " + std::to_string(g->nodes.size()) +
                " nodes, above advise's default limit of " + std::to_string(kAdviseMaxNodes) +
                " (the search plans the model dozens of times; README: Large graphs and the "
                "advisor); pass --max-nodes " +
                std::to_string(g->nodes.size()) + " to search anyway");
  }
  {
    // The searched symbol: --batch-dim, else BatchSymbol(); --dim may not bind it.
    std::string batch_symbol;
    auto resolved = ResolveBindings(g.value(), r.bindings, &batch_symbol);
    if (!resolved.ok()) return Fail(resolved.message());
    if (batch_symbol.empty()) {
      std::string symbols;
      for (const std::string& s : InputSymbols(g.value()))
        symbols += (symbols.empty() ? "" : ", ") + s;
      return Fail(
          args.model +
          ": no batch symbol to search over (no input symbol called 'batch', "
          "no symbolic dim 0 of the first input" +
          (symbols.empty() ? std::string(")") : "; name one with --batch-dim: " + symbols + ")"));
    }
    if (r.bindings.dims.count(batch_symbol)) {
      return Fail(args.model + ": --dim " + batch_symbol + ": '" + batch_symbol +
                  "' is the batch symbol advise searches over; leave it out");
    }
  }
  // What the plans cannot show: the export's mode, a loss on non-logits.
  ctx.warnings = ModelWarnings(g.value(), flags, Mode::kTrain);
  // Progress on a terminal: the search makes dozens of plans.
  Progress progress;
  int plans = 0;
  r.on_plan = [&](const AdviseProgress& step) {
    ++plans;
    std::string text =
        "advise: " + std::to_string(plans) + (plans == 1 ? " plan; " : " plans; ") +
        (step.strategy != ParallelStrategy::kSingle ? std::string(EnumName(step.strategy)) + " "
                                                    : std::string()) +
        PrecisionName(step.precision) + ", " +
        (step.checkpointed == 0 ? std::string("no checkpointing")
                                : std::to_string(step.checkpointed) + " checkpointed") +
        ", batch " + std::to_string(step.batch) + " (" + Fixed(progress.Elapsed(), 1) + " s)";
    progress.Show(text);
  };
  auto advice = Advise(g.value(), r);
  progress.Clear();
  if (!advice.ok()) return Fail(advice.message());
  PrintWarnings(ctx.warnings);
  const size_t n_alt = static_cast<size_t>(std::max(0, args.alternatives));
  if (args.format == "json") {
    std::cout << AdviceJson(ctx, advice.value(), r).dump(2) << "\n";
  } else if (args.format == "md") {
    std::cout << Markdown(ctx, advice.value(), r, n_alt);
  } else {
    std::cout << Table(ctx, advice.value(), r, n_alt);
  }
  return advice->ranked.empty() ? kExitOverBudget : kExitOk;
}

}  // namespace

void AddAdviseCommand(CLI::App* app, CliState* state) {
  auto* cmd = app->add_subcommand(
      "advise", "Largest batch that fits a memory budget, with precision and checkpoint placement");
  auto a = std::make_shared<AdviseArgs>();
  cmd->add_option("model", a->model, "ONNX model file (training export)")->required();
  cmd->add_option("--dim", a->dims, "Binds a symbolic dim other than the batch: NAME=VALUE");
  cmd->add_option("--batch-dim", a->batch_dim,
                  "The symbol searched over (default: the input symbol called 'batch', else dim 0 "
                  "of the first input)");
  AddMaxNodesFlag(cmd, &a->max_nodes);
  cmd->add_option("--budget", a->budget, "Device memory to fit in: 24GiB, 24GB, 24000MiB");
  cmd->add_option("--device", a->device,
                  "A device preset (h100-sxm, a100-40gb, rtx-4090, ...) or auto (probe the GPU)");
  cmd->add_option("--precision", a->precision,
                  "any (amp_bf16, amp_fp16, fp32) or a comma list of fp32, amp_bf16, amp_fp16, "
                  "bf16, fp16");
  AddSharedPlanFlags(cmd, &a->plan);
  AddDistFlags(cmd, &a->plan);
  cmd->add_option("--checkpoint", a->checkpoint,
                  "auto: also try activation checkpointing of the repeated blocks; none")
      ->check(CLI::IsMember({"none", "auto"}));
  cmd->add_option("--global-batch", a->global_batch,
                  "Samples per optimizer step; gradient accumulation fills the gap");
  cmd->add_option("--margin", a->margin, "Share of the budget kept free, in percent (default 5)");
  cmd->add_option("--reserve", a->reserve,
                  "CUDA context and library memory outside PyTorch (default: the device's, "
                  "else 767MiB)");
  cmd->add_option("--max-batch", a->max_batch, "Largest batch tried (at most 65536)");
  cmd->add_option("--alternatives", a->alternatives, "Alternatives shown (default 3)");
  cmd->add_option("--threads", a->threads,
                  "Candidates searched at once (default 0: one per core); the advice is the "
                  "same for any count");
  cmd->add_option("--search", a->search,
                  "replay (default): a few plans, the allocator replayed over their events at "
                  "the other batches, every answer planned; full: a plan at every batch, "
                  "doubling then bisection; predicted: a plan at every batch, from the line "
                  "through two plans' needs (where the peak is not monotone in the batch, each "
                  "may end at another batch that fits)")
      ->check(CLI::IsMember(EnumNames<BatchSearchKind>()));
  AddFormatFlag(cmd, &a->format, {"table", "json", "md"});
  cmd->callback([a, state] { state->exit_code = RunAdvise(*a); });
}

}  // namespace memplan
