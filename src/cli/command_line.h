// The whole `structdiff` command line (global options and every subcommand's, with the state
// they fill), one invocation of it, and the process-level modes main dispatches to.
#pragma once

#include <string>

#include "cli/command.h"

namespace structdiff::cli {

// The whole command line: the global options and every subcommand's, with the state they fill.
struct CommandLine {
  CLI::App app{
      "structdiff: the structure of a problem as the architecture of its neural network.\n"
      "Structured attention (dense, sparse, gather, FAVOR+, linear, diffusivity) on libtorch.\n"
      "Global options may stand before or after the subcommand."};
  GlobalOptions global;
  std::string device = "cpu";
  int world_size = 1;
  double rank_timeout = 120;
  bool dry_run = false;
  Action action;

  CommandLine();
};

// One invocation: parses the command line and, unless `check_only` or --dry-run, runs it.
// Returns the exit code.
int run_command_line(int argc, char** argv, bool check_only);

// "unknown option '--sead' for 'structdiff sudoku train'; did you mean '--seed'?" when the first
// word left over after parsing is close to a name that was valid there; "" otherwise.
std::string did_you_mean(CLI::App& app);
// The usage errors only the whole parsed line shows (outputs that collide, a device or ranks the
// command does not support); "" when it may run. Sets line.global.device.
std::string error_after_parsing(CommandLine& line);

// --world-size N: the same command line (without --world-size) as N processes, ranks 0..N-1
// meeting on the loopback through the environment torchrun would set. Waits for all; when one
// fails the others are stopped, and its exit code is the run's. Ctrl-C reaches every rank (one
// process group): they checkpoint and stop, and this process reports what they did.
int launch_local_ranks(int argc, char** argv, int world_size);

// Self-checks for the generated tests, each in this one process:
// --dry-run-lines FILE: the check of --dry-run for every command line of FILE (one per line,
// arguments separated by 0x1f). Prints each failing line after its error; exit 0 when all parse,
// else 2. The experiment scripts' test records their commands and checks them so.
int check_command_lines(const std::string& path);
// --refused-lines FILE: the opposite: every command line of FILE must be refused as a usage error
// (exit 2) with one line naming why. Prints each line accepted or refused otherwise; exit 0 when
// all were refused so, else 1.
int check_refused_lines(const std::string& path);
// --list-value-options: "COMMAND<TAB>--OPTION<TAB>TYPE<TAB>DOMAIN" for every option that takes a
// value, and "COMMAND<TAB>NAME<TAB>..." for every positional argument (COMMAND empty for the global
// ones), for a generated test to give each a hostile value.
int list_value_options();
// --list-commands: "COMMAND<TAB>DEVICES<TAB>RANKS" for every command that runs ("cpu" or "any",
// "ranks" or "one process"; "no row" for a command missing from the support table: exit 1).
int list_commands();

}  // namespace structdiff::cli
