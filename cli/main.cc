// memplan: predicts the GPU memory of a PyTorch model from its ONNX export.
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/files.h"
#include "cli/options.h"
#include "gpu_probe/gpu_probe.h"
#include "planner/text.h"

namespace {

// The closest of `names` to `word` when it is close enough, else "".
std::string Closest(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& n : names) {
    const size_t d = memplan::EditDistance(word, n);
    if (d < best_d) best = n, best_d = d;
  }
  return best;
}

std::vector<std::string> CommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

std::vector<std::string> FlagNames(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  }
  return names;
}

std::string Usage(const CLI::App* cmd) {
  if (cmd == nullptr) return "usage: memplan COMMAND ...; 'memplan help' lists the commands";
  return "usage: memplan " + cmd->get_name() + " ...; 'memplan help " + cmd->get_name() +
         "' lists its options";
}

// One `memplan: error:` line: the message, the closest flag when one is
// close, and the usage.
int ParseFailure(const CLI::App& app, const CLI::ParseError& e,
                 const std::vector<std::string>& args) {
  const CLI::App* cmd = nullptr;
  for (const CLI::App* sub : app.get_subcommands()) cmd = sub;
  std::string line = "memplan: error: " + (cmd ? cmd->get_name() + ": " : "") +
                     memplan::PrintableText(memplan::Clip(e.what(), 400));
  if (cmd != nullptr) {
    const std::vector<std::string> flags = FlagNames(*cmd);
    for (const std::string& a : args) {
      if (a.size() < 3 || a.compare(0, 2, "--") != 0) continue;
      const std::string flag = a.substr(0, a.find('='));
      bool known = false;
      for (const std::string& f : flags) known |= f == flag;
      if (known) continue;
      const std::string near = Closest(flag, flags);
      if (!near.empty()) line += " (did you mean " + near + "?)";
    }
  }
  std::cerr << line << "; " << Usage(cmd) << "\n";
  return memplan::kExitBadInput;
}

// Grows the heap once, up front, by up to 1 GiB of address space (no memory:
// a page counts once it is written) and asks the kernel for transparent huge
// pages there (madvise; the kernels' default THP mode only uses them where
// asked). A large graph's plan writes hundreds of MiB of small blocks; with
// 4 KiB pages each page is one fault (a quarter of the 100 k-node chain's CPU
// time, bench/speed.sh). glibc keeps the freed reservation as the top of its
// heap (never trimmed, see main), so every later allocation comes from it.
// Past the reservation the heap grows with ordinary pages: on the 2-core VM
// of bench/speed.sh, a huge page the host has not backed yet costs more to
// clear than the 4 KiB pages the kernel recycles (the 1 M-node chain's plan,
// 3.4 GiB: 9.0 CPU-s without huge pages, 9.0 with 1 GiB of them, 10.4 with
// 4 GiB). When the address space is short (ulimit -v) the reservation
// shrinks or is skipped.
void ReserveHugePageHeap() {
  constexpr uint64_t kHuge = uint64_t{2} << 20;
  uint64_t want = uint64_t{1} << 30;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) {
    want = std::min(want, static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2);
  }
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    want = std::min(want, static_cast<uint64_t>(rl.rlim_cur) / 4);
  }
  for (; want >= (uint64_t{64} << 20); want /= 2) {
    void* block = std::malloc(want);
    if (block == nullptr) continue;
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(block) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(block) + want) & ~(kHuge - 1);
    if (end > begin) {
      // Advice only: where the kernel has no THP, pages stay 4 KiB.
      (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
    }
    std::free(block);
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A plan builds, drops and builds again arrays of many MiB (a large graph's
  // simulated events, per plan variant). glibc would map each such array on
  // its own and unmap it when freed, so that the next one faults every page
  // in afresh; from the heap, freed memory is reused. On the 1 M-node chain
  // (bench/speed.sh) this takes the system time from 5.1 to 2.4 s (page
  // faults 1.55 M -> 0.95 M) for 3 % more peak RSS.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // never trimmed either
  ReserveHugePageHeap();
  CLI::App app{"memplan: GPU memory planning for PyTorch models, from their ONNX export",
               "memplan"};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();  // --help shows every default
  const std::string version =
      std::string("memplan 0.1.0\nGPU support (probe, validate, --device auto): ") +
      (memplan::GpuSupportBuilt()
           ? "built; its library (libmemplan_gpu.so: CUDA, cuBLAS, cuDNN) is loaded when those "
             "run, and they say so if it cannot be"
           : "not built (no CUDA Toolkit at build time, or -DMEMPLAN_WITH_CUDA=OFF)");
  app.set_version_flag("--version", version);
  memplan::CliState state;
  memplan::AddInspectCommand(&app, &state);
  memplan::AddPlanCommand(&app, &state);
  memplan::AddAdviseCommand(&app, &state);
  memplan::AddCheckCommand(&app, &state);
  memplan::AddProbeCommand(&app, &state);
  memplan::AddValidateCommand(&app, &state);
  memplan::AddSweepCommand(&app, &state);
  memplan::AddCompareCommand(&app, &state);
  memplan::AddEstimateCommand(&app, &state);
  memplan::CheckNumberFlags(&app);
  app.footer("'memplan help COMMAND' (or 'memplan COMMAND --help') lists a command's options.");

  std::vector<std::string> args(argv + 1, argv + argc);
  // Arguments reach headers, reports and messages: a file name holding a
  // newline or an escape sequence (a file in a pull request) would forge
  // lines there. No flag needs one.
  for (const std::string& a : args) {
    if (memplan::HasControlChar(a) || !memplan::ValidUtf8(a)) {
      std::cerr << "memplan: error: " << memplan::PrintableText(memplan::Clip(a, 200))
                << ": this argument holds a control character or is not UTF-8 (rename the "
                   "file)\n";
      return memplan::kExitBadInput;
    }
  }
  // Bare `memplan`: the commands, on stderr (it is a usage error, exit 2).
  if (args.empty()) {
    std::cerr << app.help();
    return memplan::kExitBadInput;
  }
  // `memplan help [COMMAND]`.
  if (args[0] == "help") {
    if (args.size() == 1) {
      std::cout << app.help();
      return memplan::kExitOk;
    }
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == args[1]) {
        std::cout << sub->help();
        return memplan::kExitOk;
      }
    }
    const std::string near = Closest(args[1], CommandNames(app));
    std::cerr << "memplan: error: help: unknown command '"
              << memplan::PrintableText(memplan::Clip(args[1], 60)) << "'"
              << (near.empty() ? "" : " (did you mean '" + near + "'?)") << "; " << Usage(nullptr)
              << "\n";
    return memplan::kExitBadInput;
  }
  // An unknown command, named as such (not "A subcommand is required").
  if (args[0].empty() || args[0][0] != '-') {
    const std::vector<std::string> names = CommandNames(app);
    bool known = false;
    for (const std::string& n : names) known |= n == args[0];
    if (!known) {
      const std::string near = Closest(args[0], names);
      std::cerr << "memplan: error: unknown command '"
                << memplan::PrintableText(memplan::Clip(args[0], 60)) << "'"
                << (near.empty() ? "" : " (did you mean '" + near + "'?)") << "; " << Usage(nullptr)
                << "\n";
      return memplan::kExitBadInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return ParseFailure(app, e, args);
  } catch (const std::bad_alloc&) {
    std::cerr << "memplan: error: " << memplan::OutOfMemoryMessage() << "\n";
    return memplan::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "memplan: error: " << memplan::Status::Error(e.what()).message() << "\n";
    return memplan::kExitBadInput;
  }
  memplan::FlushWarnings(state.exit_code);
  return state.exit_code;
}
