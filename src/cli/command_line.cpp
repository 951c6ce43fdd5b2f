#include "cli/command_line.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <stdexcept>

#include "structdiff/device.h"
#include "structdiff/ranks.h"
#include "structdiff/runtime.h"
#include "structdiff/model_file.h"
#include "structdiff/training_loop.h"
#include "util/build_info.h"
#include "util/text.h"

namespace structdiff::cli {
namespace {

std::string command_line(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) line += (i ? " " : "") + std::string(argv[i]);
  return line;
}

}  // namespace

CommandLine::CommandLine() {
  app.name("structdiff");
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", version_line(),
                       "Print the commit, the libtorch version and whether the CUDA kernels were "
                       "compiled, and exit");
  // Subcommands inherit this: options they do not know (the global ones) pass up to here.
  app.fallthrough();
  global.threads = default_threads();
  // More threads than cores only slows a run down; far more makes OpenMP hang creating them.
  const int max_threads = 4 * default_threads();
  app.add_option("--threads", global.threads, "Intra-op threads (default: all cores)")
      ->check(between(1, max_threads).description("IN [1, " + std::to_string(max_threads) +
                                                   "] (4 x this machine's cores)"))
      ->capture_default_str();
  app.add_option("--seed", global.seed, "Random seed")->capture_default_str();
  // One name for where models run, across subcommands; a device this libtorch cannot use is a
  // usage error that says why.
  app.add_option("--device", device, "Where models run: cpu, cuda or cuda:N")
      ->check([](const std::string& name) -> std::string {
        try {
          parse_device(name);
          return "";
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      })
      ->capture_default_str();
  app.add_option("--world-size", world_size,
                 "Train data-parallel on N local ranks (processes) over PyTorch's distributed "
                 "engine; several machines: set MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE as "
                 "torchrun does")
      ->check(between(1, 64))
      ->capture_default_str();
  app.add_option("--rank-timeout", rank_timeout,
                 "Seconds a rank waits for the others before it stops with an error")
      ->check(positive())
      ->capture_default_str();
  app.add_flag("--dry-run", dry_run,
               "Check the command line (options, values, output paths) and exit without running");
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks (speed and memory)");
  bench->require_subcommand(1);
  register_bench_attention(*bench, global, action);
  register_bench_gsdm(*bench, global, action);
  register_bench_difformer(*bench, global, action);
  register_bench_ddpm(*bench, global, action);
  register_bench_tracformer(*bench, global, action);
  register_pattern(app, global, action);
  register_gsdm(app, global, action);
  register_sudoku(app, global, action);
  register_difformer(app, global, action);
  register_classifier(app, global, action);
  register_ddpm(app, global, action);
  register_tracformer(app, global, action);
  register_unn(app, global, action);
  register_model(app, global, action);
  register_export(app, global, action);
  apply_value_domains(app);
}

int run_command_line(int argc, char** argv, bool check_only) {
  CommandLine line;
  CLI::App& app = line.app;
  GlobalOptions& global = line.global;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Left-over words explain only these two errors; after others they may be unrelated.
    const bool leftover_error = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ||
                                dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
    const std::string suggestion = leftover_error ? did_you_mean(app) : "";
    std::cerr << "structdiff: error: " << (suggestion.empty() ? std::string(e.what()) : suggestion)
              << " (run with --help for usage)\n";
    return 2;
  } catch (const std::exception& e) {
    // An option's own parser (e.g. --size's) rejected its value: a usage error too.
    std::cerr << "structdiff: error: " << e.what() << " (run with --help for usage)\n";
    return 2;
  }
  if (const std::string error = error_after_parsing(line); !error.empty()) {
    std::cerr << "structdiff: error: " << error << " (run with --help for usage)\n";
    return 2;
  }
  if (line.dry_run || check_only) return 0;
  if (line.world_size > 1) return launch_local_ranks(argc, argv, line.world_size);
  try {
    global.ranks = train::Ranks::from_environment(
        std::chrono::milliseconds(static_cast<int64_t>(line.rank_timeout * 1000)));
    // Rank 0 speaks for the run; the others' output would repeat it line for line.
    if (!global.writes_outputs() && std::freopen("/dev/null", "w", stdout) == nullptr) {
      throw std::runtime_error("cannot silence rank " + std::to_string(global.ranks->rank()));
    }
    set_threads(global.threads);
    train::set_run_description(command_line(argc, argv), global.seed);
    line.action();
  } catch (const train::TrainingStopped& e) {
    std::cerr << "structdiff: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::string message = message_of(e);
    // One line: multi-line library messages (e.g. libtorch's) are joined.
    for (char& c : message) {
      if (c == '\n') c = ' ';
    }
    std::cerr << "structdiff: error: " << message << "\n";
    return 1;
  }
  return 0;
}

}  // namespace structdiff::cli
