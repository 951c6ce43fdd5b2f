// One value vocabulary for every numeric option of every command. Options declare a domain with
// the validators below (or CLI::IsMember); apply_value_domains then gives every option the checks
// its type needs whatever it declared, so that a new option cannot let NaN, infinity, a negative
// count or a value that is no number (CLI11 reads an empty one as the default) through: a
// floating-point value must be finite unless its domain says otherwise (positive_or_infinite),
// an unsigned one must be written without a minus sign (CLI11 would wrap -1 to 2^64 - 1), and so
// must an integer that declares no domain of its own (counts, sizes and steps; an option that
// takes negative values says so with between()). All are parse-time checks: usage errors, exit 2,
// the same in --dry-run as in a run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace structdiff::cli {

// "must be > 0, got -3" / "must be >= 0, got -3"; finite.
CLI::Validator positive();
CLI::Validator non_negative();
// In (0, 1]: "must be in (0, 1], got 2".
CLI::Validator fraction();
// In [low, high] (so finite): "must be in [0, 1], got 2".
CLI::Validator between(double low, double high);
// >= low, finite: "must be >= 1, got 0.5".
CLI::Validator at_least(double low);
// > 0 or inf (e.g. --clip inf: no clipping).
CLI::Validator positive_or_infinite();

// Upper bounds for quantities that no memory check covers, so that a hostile value is refused
// instead of running for ever: a depth builds one module per unit (1..1024), a time budget is
// waited out (at most a day, 86400 s), and a count of work (steps, epochs, runs, puzzles) is at
// most `high`.
CLI::Validator depth();
CLI::Validator seconds_budget();
CLI::Validator work_count(int64_t high);

// Walks `app` and all its subcommands and adds the type's checks to every option that takes a
// value. Call once, after every option is registered.
void apply_value_domains(CLI::App& app);

// Every option that takes a value, with its CLI11 type name (FLOAT, INT, UINT, TEXT, ...) and
// declared domain: what a generated test walks.
struct OptionEntry {
  std::string command;  // "sudoku train"
  std::string name;     // "--lr"
  std::string type;     // "FLOAT"
  std::string domain;   // the declared validators' descriptions ("POSITIVE"), "" when none
};
std::vector<OptionEntry> list_value_options(CLI::App& app);

}  // namespace structdiff::cli
