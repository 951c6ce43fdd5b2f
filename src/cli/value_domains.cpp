#include "cli/value_domains.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>

namespace structdiff::cli {
namespace {

constexpr const char* kAllowsInfinity = "allows-infinity";

// The value as a double, or false when `text` is not a number (CLI11's own parse decides later
// what else it accepts; here only numbers are judged).
bool as_number(const std::string& text, double& value) {
  return CLI::detail::lexical_cast(text, value);
}

// What every numeric check says of a value that is no number.
std::string not_a_number(const std::string& text) { return "'" + text + "' is not a number"; }

CLI::Validator bound(bool strict, bool infinity, const std::string& description,
                     const std::string& name) {
  const std::string limit = strict ? "> 0" : ">= 0";
  return CLI::Validator(
      [strict, infinity, limit](std::string& text) -> std::string {
        double value = 0;
        if (!as_number(text, value)) return not_a_number(text);
        const bool in_bound = strict ? value > 0 : value >= 0;  // NaN is in neither
        if (infinity) return in_bound ? "" : "must be " + limit + " (or inf), got " + text;
        if (!std::isfinite(value)) return "must be a finite number " + limit + ", got " + text;
        return in_bound ? "" : "must be " + limit + ", got " + text;
      },
      description, name);
}

CLI::Validator at_most(double high, const std::string& name) {
  return CLI::Validator(
      [high](std::string& text) -> std::string {
        double value = 0;
        if (!as_number(text, value) || value <= high) return "";  // the other checks judge the rest
        return "must be at most " + std::to_string(static_cast<int64_t>(high)) + ", got " + text;
      },
      "AT MOST " + std::to_string(static_cast<int64_t>(high)), name);
}

CLI::Validator a_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        return as_number(text, value) ? "" : not_a_number(text);
      },
      "", "a-number");
}

CLI::Validator finite() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        if (!as_number(text, value) || std::isfinite(value)) return "";
        return "must be a finite number, got " + text;
      },
      "", "finite");
}

CLI::Validator no_minus_sign() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const auto first = text.find_first_not_of(" \t");
        if (first != std::string::npos && text[first] == '-') {
          return "must be >= 0, got " + text;
        }
        return "";
      },
      "", "not-negative");
}

// CLI11 reads integers with strtoll / strtoull, which turn text beyond the type's range into its
// limit without a word (a --seed of 2^64 would run as 2^64 - 1): refuse such text instead.
CLI::Validator within_integer_range(bool is_unsigned) {
  return CLI::Validator(
      [is_unsigned](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        if (is_unsigned) {
          std::strtoull(text.c_str(), &end, 0);
        } else {
          std::strtoll(text.c_str(), &end, 0);
        }
        return errno == ERANGE ? "must fit a 64-bit integer, got " + text : "";
      },
      "", "integer-range");
}

// CLI11 answers "which validators" only by throwing for a missing one: by name, or by index.
template <typename Key>
bool has_validator(CLI::Option& option, Key key) {
  try {
    option.get_validator(key);
    return true;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

// The CLI11 type name without the validators' descriptions ("FLOAT:POSITIVE" -> "FLOAT").
std::string base_type(const CLI::Option& option) {
  const std::string full = option.get_type_name();
  return full.substr(0, full.find(':'));
}

void walk(CLI::App& app, const std::string& command,
          const std::function<void(const std::string&, CLI::Option&)>& visit) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_items_expected_max() > 0 && (!option->get_lnames().empty() || option->get_positional())) {
      visit(command, *option);
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    walk(*sub, command.empty() ? sub->get_name() : command + " " + sub->get_name(), visit);
  }
}

// A bound as written: whole numbers in full (1000000, not 1e+06).
std::string bound_text(double value) {
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  return CLI::detail::to_string(value);
}

}  // namespace

CLI::Validator fraction() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        if (!as_number(text, value)) return not_a_number(text);
        return value > 0 && value <= 1 ? "" : "must be in (0, 1], got " + text;
      },
      "FRACTION", "fraction");
}

CLI::Validator at_least(double low) {
  const std::string limit = ">= " + CLI::detail::to_string(low);
  return CLI::Validator(
      [low, limit](std::string& text) -> std::string {
        double value = 0;
        if (!as_number(text, value)) return not_a_number(text);
        if (!std::isfinite(value)) return "must be a finite number " + limit + ", got " + text;
        return value >= low ? "" : "must be " + limit + ", got " + text;
      },
      "AT LEAST " + CLI::detail::to_string(low), "at-least");
}

CLI::Validator between(double low, double high) {
  const std::string interval = "[" + bound_text(low) + ", " + bound_text(high) + "]";
  return CLI::Validator(
      [low, high, interval](std::string& text) -> std::string {
        double value = 0;
        if (!as_number(text, value)) return not_a_number(text);
        return value >= low && value <= high ? "" : "must be in " + interval + ", got " + text;  // NaN: neither
      },
      "IN " + interval, "between");
}

CLI::Validator positive() { return bound(true, false, "POSITIVE", "positive"); }
CLI::Validator non_negative() { return bound(false, false, "NONNEGATIVE", "non-negative"); }
CLI::Validator positive_or_infinite() {
  return bound(true, true, "POSITIVE or inf", kAllowsInfinity);
}

CLI::Validator depth() { return positive() & at_most(1024, "depth"); }
CLI::Validator seconds_budget() { return non_negative() & at_most(86400, "seconds-budget"); }
CLI::Validator work_count(int64_t high) {
  return positive() & at_most(static_cast<double>(high), "work-count");
}

void apply_value_domains(CLI::App& app) {
  walk(app, "", [](const std::string&, CLI::Option& option) {
    const std::string type = base_type(option);
    const bool declares_domain = has_validator(option, 0);
    if (type == "FLOAT" || type == "INT" || type == "UINT") option.check(a_number());
    if (type == "FLOAT" && !has_validator(option, std::string(kAllowsInfinity))) {
      option.check(finite());
    }
    if (type == "UINT" || (type == "INT" && !declares_domain)) option.check(no_minus_sign());
    if (type == "UINT" || type == "INT") option.check(within_integer_range(type == "UINT"));
  });
}

std::vector<OptionEntry> list_value_options(CLI::App& app) {
  std::vector<OptionEntry> entries;
  walk(app, "", [&](const std::string& command, CLI::Option& option) {
    const std::string full = option.get_type_name();
    const size_t colon = full.find(':');
    // A positional argument by its name alone ("model"), an option with its dashes.
    const std::string name = option.get_lnames().empty() ? option.get_name() : "--" + option.get_lnames().front();
    entries.push_back({command, name, base_type(option),
                       colon == std::string::npos ? "" : full.substr(colon + 1)});
  });
  return entries;
}

}  // namespace structdiff::cli
