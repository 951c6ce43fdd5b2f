// `structdiff gsdm mask|invariance`: inspect a graphical model, from a spec file, the built-in
// Sudoku or a registered problem: its attention mask, and which index permutations leave the mask
// invariant (Theorem 3.1).
#include <cstdio>
#include <stdexcept>

#include "cli/gsdm_options.h"
#include "structdiff/graph.h"
#include "structdiff/gsdm_problems.h"
#include "structdiff/sudoku_model.h"

namespace structdiff::cli {
namespace {

struct GraphCommand {
  std::string spec;
  int sudoku_size = 0;
  std::string problem;
  gsdm::ProblemOptions problem_options;
  std::string png;
  std::string rule = "standard";
  uint64_t mask_seed = 1;
  std::vector<std::string> axes;
  std::string permutation;
};

graph::GraphicalModel load(const GraphCommand& o) {
  if (!o.spec.empty()) return graph::GraphicalModel::load(o.spec);
  if (!o.problem.empty()) {
    const gsdm::Problem& problem = gsdm::find_problem(o.problem);
    return problem.graph(gsdm::resolve_options(problem, o.problem_options));
  }
  int n = 0;
  while (n * n < o.sudoku_size) ++n;
  if (n * n != o.sudoku_size) throw std::invalid_argument("--sudoku takes 4, 9, 16 or 25");
  return sudoku::graphical_model(n);
}

void show_mask(const GraphCommand& o) {
  const graph::GraphicalModel model = load(o);
  const AttentionPattern mask = model.compile({graph::parse_mask_rule(o.rule), o.mask_seed});
  const PatternStats s = mask.stats();
  std::printf("%ld variables in %zu arrays; mask: %ld entries, degree min/mean/max %ld/%.2f/%ld, "
              "density %.4g\n",
              static_cast<long>(model.num_nodes()), model.arrays().size(),
              static_cast<long>(s.entries), static_cast<long>(s.min_degree), s.mean_degree,
              static_cast<long>(s.max_degree), s.density);
  if (!o.png.empty()) {
    mask.write_png(o.png);
    std::printf("wrote %s\n", o.png.c_str());
  }
}

void check_invariance(const GraphCommand& o) {
  graph::IndexPermutation p;
  // The library's parsers, not std::stoll or CLI11's: those read "0x" as 0 and "010" as octal 8.
  // Their messages start "axis 'R:0x'" and "permutation '1,0x'", naming the option.
  p.permutation = graph::parse_permutation(o.permutation);
  for (const std::string& axis : o.axes) p.axes.push_back(graph::parse_axis(axis));
  const graph::GraphicalModel model = load(o);
  const bool invariant = model.mask_invariant_under(p);
  std::printf("mask %s under this permutation: sharing embeddings over it is %s\n",
              invariant ? "is invariant" : "is NOT invariant", invariant ? "valid" : "not valid");
}

void add_source_options(CLI::App* cmd, GraphCommand& o) {
  auto* spec = cmd->add_option("--spec", o.spec, "Graphical model JSON (see docs/gsdm-spec.md)")
                   ->check(CLI::ExistingFile);
  auto* sudoku = cmd->add_option("--sudoku", o.sudoku_size, "Built-in Sudoku model of this side")
                     ->check(CLI::IsMember({4, 9, 16, 25}));
  auto* problem = add_problem_options(*cmd, o.problem, o.problem_options);
  cmd->parse_complete_callback(problem_check(o.problem, o.problem_options));
  spec->excludes(sudoku);
  spec->excludes(problem);
  sudoku->excludes(problem);
}

}  // namespace

void register_gsdm_graph_commands(CLI::App& gsdm, Action& action) {
  auto o = std::make_shared<GraphCommand>();
  CLI::App* mask = gsdm.add_subcommand("mask", "Compile a graphical model to its attention mask");
  add_source_options(mask, *o);
  mask->add_option("--png", o->png, "Write the mask as a PNG")
      ->check(writable_file())
      ->check(png_name());
  mask->add_option("--rule", o->rule, "standard, non-symmetrised or random (as gsdm train --mask)")
      ->check(CLI::IsMember(graph::mask_rule_names()))
      ->capture_default_str();
  mask->add_option("--mask-seed", o->mask_seed, "The random mask's draw")->capture_default_str();
  mask->callback([o, mask, &action] {
    if (o->spec.empty() && o->sudoku_size == 0 && o->problem.empty()) {
      throw CLI::ValidationError("mask", "give --spec, --sudoku or --problem");
    }
    action = [o] { show_mask(*o); };
  });

  CLI::App* inv = gsdm.add_subcommand(
      "invariance", "Check Theorem 3.1: is the mask invariant under an index permutation?");
  add_source_options(inv, *o);
  inv->add_option("--axis", o->axes, "ARRAY:AXIS permuted together (repeatable)")->required();
  inv->add_option("--permutation", o->permutation, "New position of each index value, e.g. 1,0,2")
      ->required();
  inv->callback([o, &action] {
    if (o->spec.empty() && o->sudoku_size == 0 && o->problem.empty()) {
      throw CLI::ValidationError("invariance", "give --spec, --sudoku or --problem");
    }
    action = [o] { check_invariance(*o); };
  });
}

}  // namespace structdiff::cli
