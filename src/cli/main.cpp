#include <iostream>
#include <stdexcept>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <c10/util/Logging.h>
#include <torch/torch.h>

#include "cli/command.h"
#include "structdiff/runtime.h"

int main(int argc, char** argv) {
  using namespace structdiff;
#ifdef __GLIBC__
  // A training step frees and reallocates the same few-MB activations every step. glibc's
  // defaults hand that memory back to the kernel and fault it in again (about 15 % of a Sudoku
  // training step); keeping it in the heap avoids that. Setting the mmap threshold explicitly
  // matters: setting only the trim threshold switches off glibc's adaptive mmap threshold.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
  // The memory hook of `bench` makes c10 warn about blocks allocated before it started; only
  // errors are worth a user's attention here.
#ifdef C10_USE_GLOG
  FLAGS_minloglevel = 2;  // c10 forwards its level to glog only downwards
#else
  FLAGS_caffe2_log_level = 2;
#endif
  CLI::App app{
      "structdiff: the structure of a problem as the architecture of its neural network.\n"
      "Structured attention (dense, sparse, gather, FAVOR+, linear, diffusivity) on libtorch."};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");

  cli::GlobalOptions global;
  global.threads = default_threads();
  app.add_option("--threads", global.threads, "Intra-op threads (default: all cores)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seed", global.seed, "Random seed")->capture_default_str();

  cli::Action action;
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks (speed and memory)");
  bench->require_subcommand(1);
  cli::register_bench_attention(*bench, global, action);
  cli::register_bench_gsdm(*bench, global, action);
  cli::register_bench_difformer(*bench, global, action);
  cli::register_bench_ddpm(*bench, global, action);
  cli::register_pattern(app, global, action);
  cli::register_gsdm(app, global, action);
  cli::register_sudoku(app, global, action);
  cli::register_difformer(app, global, action);
  cli::register_classifier(app, global, action);
  cli::register_ddpm(app, global, action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "structdiff: error: " << e.what() << " (run with --help for usage)\n";
    return 2;
  }
  try {
    set_threads(global.threads);
    torch::manual_seed(global.seed);
    action();
  } catch (const std::exception& e) {
    std::cerr << "structdiff: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
