#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#include <torch/torch.h>

#include "cli/command.h"
#include "cli/output_policy.h"
#include "structdiff/device.h"
#include "structdiff/ranks.h"
#include "structdiff/runtime.h"
#include "structdiff/train.h"
#include "util/build_info.h"
#include "util/text.h"

namespace {

using namespace structdiff;

// The subcommands the user selected, outermost first.
std::vector<CLI::App*> selected_chain(CLI::App& app) {
  std::vector<CLI::App*> chain{&app};
  for (;;) {
    const std::vector<CLI::App*> selected = chain.back()->get_subcommands();
    if (selected.empty()) return chain;
    chain.push_back(selected.front());
  }
}

// "unknown option '--sead' for 'structdiff sudoku train'; did you mean '--seed'?" when the first
// word left over after parsing is close to a name that was valid there; "" otherwise.
std::string did_you_mean(CLI::App& app) {
  const std::vector<std::string> extras = app.remaining(/*recurse=*/true);
  if (extras.empty()) return "";
  std::string word = extras.front();
  const std::vector<CLI::App*> chain = selected_chain(app);
  std::string where;
  for (const CLI::App* level : chain) where += (where.empty() ? "" : " ") + level->get_name();
  if (where.empty()) where = "structdiff";
  std::vector<std::string> names;
  if (word.rfind("-", 0) == 0) {
    word = word.substr(0, word.find('='));
    // Global options fall through, so every level's options are valid here.
    for (const CLI::App* level : chain) {
      for (const CLI::Option* option : level->get_options()) {
        for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
      }
    }
    const std::string closest = closest_name(word, names);
    if (closest.empty()) return "";
    return "unknown option '" + word + "' for '" + where + "'; did you mean '" + closest + "'?";
  }
  for (const CLI::App* command : chain.back()->get_subcommands([](CLI::App*) { return true; })) {
    names.push_back(command->get_name());
  }
  const std::string closest = closest_name(word, names);
  if (closest.empty()) {
    if (names.empty()) return "";
    std::string listed;
    for (const std::string& name : names) listed += (listed.empty() ? "" : ", ") + name;
    return "unknown command '" + word + "' for '" + where + "'; the commands are " + listed;
  }
  return "unknown command '" + word + "' for '" + where + "'; did you mean '" + closest + "'?";
}

std::string command_line(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) line += (i ? " " : "") + std::string(argv[i]);
  return line;
}

// The ranks a --world-size run starts, for the signal handler to pass a SIGTERM on to.
std::vector<pid_t> g_ranks;

extern "C" void forward_termination(int) {
  for (const pid_t pid : g_ranks) ::kill(pid, SIGTERM);
}

// --world-size N: the same command line (without --world-size) as N processes, ranks 0..N-1
// meeting on the loopback through the environment torchrun would set. Waits for all; when one
// fails the others are stopped, and its exit code is the run's. Ctrl-C reaches every rank (one
// process group): they checkpoint and stop, and this process reports what they did.
int launch_local_ranks(int argc, char** argv, int world_size) {
  std::vector<std::string> arguments;
  for (int i = 0; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--world-size") {
      ++i;
    } else if (word.rfind("--world-size=", 0) != 0) {
      arguments.push_back(word);
    }
  }
  std::vector<char*> child_argv;
  for (std::string& word : arguments) child_argv.push_back(word.data());
  child_argv.push_back(nullptr);
  const std::string port = std::to_string(train::free_loopback_port());
  for (int rank = 0; rank < world_size; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("cannot start rank " + std::to_string(rank));
    if (pid == 0) {
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(world_size).c_str(), 1);
      ::execv("/proc/self/exe", child_argv.data());
      std::perror("structdiff: cannot start a rank");
      std::_Exit(127);
    }
    g_ranks.push_back(pid);
  }
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, forward_termination);
  int exit_code = 0, running = world_size;
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    --running;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && exit_code == 0) {
      exit_code = code;
      const auto rank = std::find(g_ranks.begin(), g_ranks.end(), pid) - g_ranks.begin();
      std::cerr << "structdiff: rank " << rank << " of " << world_size << " ended with exit code "
                << code << (running > 0 ? "; stopping the others" : "") << "\n";
      for (const pid_t other : g_ranks) {
        if (other != pid) ::kill(other, SIGTERM);
      }
    }
  }
  return exit_code;
}

// The whole command line: the global options and every subcommand's, with the state they fill.
struct CommandLine {
  CLI::App app{
      "structdiff: the structure of a problem as the architecture of its neural network.\n"
      "Structured attention (dense, sparse, gather, FAVOR+, linear, diffusivity) on libtorch.\n"
      "Global options may stand before or after the subcommand."};
  cli::GlobalOptions global;
  std::string device = "cpu";
  int world_size = 1;
  double rank_timeout = 120;
  bool dry_run = false;
  cli::Action action;

  CommandLine();
};

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
      ->check(CLI::Range(1, max_threads).description("in 1.." + std::to_string(max_threads) +
                                                      " (4 x this machine's cores)"))
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
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--rank-timeout", rank_timeout,
                 "Seconds a rank waits for the others before it stops with an error")
      ->check(cli::positive())
      ->capture_default_str();
  app.add_flag("--dry-run", dry_run,
               "Check the command line (options, values, output paths) and exit without running");
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks (speed and memory)");
  bench->require_subcommand(1);
  cli::register_bench_attention(*bench, global, action);
  cli::register_bench_gsdm(*bench, global, action);
  cli::register_bench_difformer(*bench, global, action);
  cli::register_bench_ddpm(*bench, global, action);
  cli::register_bench_tracformer(*bench, global, action);
  cli::register_pattern(app, global, action);
  cli::register_gsdm(app, global, action);
  cli::register_sudoku(app, global, action);
  cli::register_difformer(app, global, action);
  cli::register_classifier(app, global, action);
  cli::register_ddpm(app, global, action);
  cli::register_tracformer(app, global, action);
  cli::register_unn(app, global, action);
  cli::register_model(app, global, action);
  cli::register_export(app, global, action);
  cli::apply_value_domains(app);
}

// One invocation: parses the command line and, unless `check_only` or --dry-run, runs it.
// Returns the exit code.
int run_command_line(int argc, char** argv, bool check_only) {
  CommandLine line;
  CLI::App& app = line.app;
  cli::GlobalOptions& global = line.global;
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
  if (const std::string conflict = cli::output_conflict(app); !conflict.empty()) {
    std::cerr << "structdiff: error: " << conflict << " (run with --help for usage)\n";
    return 2;
  }
  global.device = parse_device(line.device);
  const bool launched_rank = std::getenv("WORLD_SIZE") != nullptr;
  std::string command;
  for (const CLI::App* level : selected_chain(app)) {
    if (level != &app) command += (command.empty() ? "" : " ") + level->get_name();
  }
  try {
    cli::check_support(command, global.device, line.world_size > 1 || launched_rank);
  } catch (const std::exception& e) {
    std::cerr << "structdiff: error: " << e.what() << " (run with --help for usage)\n";
    return 2;
  }
  if (line.world_size > 1 && launched_rank) {
    std::cerr << "structdiff: error: --world-size starts local ranks itself; with WORLD_SIZE "
                 "set (torchrun) leave it out (run with --help for usage)\n";
    return 2;
  }
  if (line.dry_run || check_only) return 0;
  if (line.world_size > 1) return launch_local_ranks(argc, argv, line.world_size);
  try {
    global.ranks = train::Ranks::from_environment(
        std::chrono::milliseconds(static_cast<int64_t>(line.rank_timeout * 1000)));
    // Rank 0 speaks for the run; the others' output would repeat it line for line.
    if (global.ranks && !global.ranks->is_root() && std::freopen("/dev/null", "w", stdout) == nullptr) {
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

// Checks every command line of the file at `path` in this one process (one line per command,
// arguments separated by the ASCII unit separator 0x1f): `check` gets the line as shown to a
// user and its argv, and returns false for a line that fails. Prints "K of N command lines
// <verb>"; returns the number that failed, or -1 when the file cannot be read.
int check_lines(const std::string& path, const std::string& verb,
                const std::function<bool(const std::string&, int, char**)>& check) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "structdiff: error: cannot read " << path << "\n";
    return -1;
  }
  int failures = 0, lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    std::vector<std::string> words{"structdiff"};
    for (size_t at = 0; at <= line.size();) {
      const size_t end = std::min(line.find('\x1f', at), line.size());
      words.push_back(line.substr(at, end - at));
      at = end + 1;
    }
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    ++lines;
    std::replace(line.begin(), line.end(), '\x1f', ' ');
    if (!check("structdiff " + line, static_cast<int>(argv.size()), argv.data())) ++failures;
  }
  std::cout << lines - failures << " of " << lines << " command lines " << verb << "\n";
  return failures;
}

// --dry-run-lines FILE: the check of --dry-run for every command line of FILE. Prints each
// failing line after its error; exit 0 when all parse, else 2. The experiment scripts' test records
// their commands and checks them so, instead of starting a process per command.
int check_command_lines(const std::string& path) {
  const int failures = check_lines(path, "parse", [](const std::string& shown, int argc, char** argv) {
    if (run_command_line(argc, argv, /*check_only=*/true) == 0) return true;
    std::cerr << "FAILED: " << shown << "\n";
    return false;
  });
  return failures == 0 ? 0 : failures < 0 ? 1 : 2;
}

// --refused-lines FILE: the opposite: every command line of FILE must be refused as a usage error
// (exit 2) with one line naming why. Prints each line accepted or refused otherwise; exit 0 when
// all were refused so, else 1.
int check_refused_lines(const std::string& path) {
  const int failures = check_lines(path, "refused", [](const std::string& shown, int argc, char** argv) {
    std::ostringstream error;
    std::streambuf* const original = std::cerr.rdbuf(error.rdbuf());
    int code = -1;
    try {
      code = run_command_line(argc, argv, /*check_only=*/true);
    } catch (...) {
    }
    std::cerr.rdbuf(original);
    const std::string message = error.str();
    const bool one_line = !message.empty() && message.find('\n') == message.size() - 1;
    if (code == 2 && one_line && message.rfind("structdiff: error: ", 0) == 0) return true;
    std::cout << "NOT REFUSED (exit " << code << "): " << shown << "\n  " << message
              << (one_line ? "" : "\n");
    return false;
  });
  return failures == 0 ? 0 : 1;
}

// --list-value-options: "COMMAND<TAB>--OPTION<TAB>TYPE<TAB>DOMAIN" for every option that takes a
// value (COMMAND empty for the global ones), for a generated test to give each a hostile value.
int list_value_options() {
  CommandLine line;
  for (const cli::OptionEntry& entry : cli::list_value_options(line.app)) {
    std::cout << entry.command << '\t' << entry.name << '\t' << entry.type << '\t'
              << entry.domain << '\n';
  }
  return 0;
}

// --list-commands: "COMMAND<TAB>DEVICES<TAB>RANKS" for every command that runs ("cpu" or "any",
// "ranks" or "one process"; "no row" for a command missing from the support table: exit 1).
void list_commands(const CLI::App& level, const std::string& prefix, int& missing) {
  for (const CLI::App* command : level.get_subcommands([](const CLI::App*) { return true; })) {
    const std::string name = prefix.empty() ? command->get_name() : prefix + " " + command->get_name();
    if (!command->get_subcommands([](const CLI::App*) { return true; }).empty()) {
      list_commands(*command, name, missing);
      continue;
    }
    const std::optional<cli::Support> support = cli::support_of(name);
    missing += !support;
    std::cout << name << '\t'
              << (!support ? "no row" : support->devices ? "any" : "cpu") << '\t'
              << (!support ? "no row" : support->ranks ? "ranks" : "one process") << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
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
  if (argc == 3 && std::string(argv[1]) == "--dry-run-lines") return check_command_lines(argv[2]);
  if (argc == 3 && std::string(argv[1]) == "--refused-lines") return check_refused_lines(argv[2]);
  if (argc == 2 && std::string(argv[1]) == "--list-value-options") return list_value_options();
  if (argc == 2 && std::string(argv[1]) == "--list-commands") {
    CommandLine line;
    int missing = 0;
    list_commands(line.app, "", missing);
    return missing == 0 ? 0 : 1;
  }
  return run_command_line(argc, argv, /*check_only=*/false);
}
