// `structdiff gsdm`: inspect a graphical model description — its attention mask and which index
// permutations leave the mask invariant (Theorem 3.1).
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "cli/command.h"
#include "structdiff/graph.h"
#include "structdiff/sudoku_model.h"

namespace structdiff::cli {
namespace {

struct GsdmOptions {
  std::string spec;
  int sudoku_size = 0;
  std::string png;
  std::vector<std::string> axes;
  std::string permutation;
};

graph::GraphicalModel load(const GsdmOptions& o) {
  if (!o.spec.empty()) return graph::GraphicalModel::load(o.spec);
  int n = 0;
  while (n * n < o.sudoku_size) ++n;
  if (n * n != o.sudoku_size) throw std::invalid_argument("--sudoku takes 4, 9, 16 or 25");
  return sudoku::graphical_model(n);
}

void show_mask(const GsdmOptions& o) {
  const graph::GraphicalModel model = load(o);
  const AttentionPattern mask = model.compile();
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

void check_invariance(const GsdmOptions& o) {
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

void add_source_options(CLI::App* cmd, GsdmOptions& o) {
  auto* spec = cmd->add_option("--spec", o.spec, "Graphical model JSON (see docs/gsdm-spec.md)")
                   ->check(CLI::ExistingFile);
  auto* sudoku = cmd->add_option("--sudoku", o.sudoku_size, "Built-in Sudoku model of this side")
                     ->check(CLI::IsMember({4, 9, 16, 25}));
  spec->excludes(sudoku);
}

}  // namespace

void register_gsdm(CLI::App& app, const GlobalOptions& /*global*/, Action& action) {
  auto o = std::make_shared<GsdmOptions>();
  CLI::App* gsdm = app.add_subcommand("gsdm", "Graphically structured diffusion: inspect models");
  gsdm->require_subcommand(1);

  CLI::App* mask = gsdm->add_subcommand("mask", "Compile a graphical model to its attention mask");
  add_source_options(mask, *o);
  mask->add_option("--png", o->png, "Write the mask as a PNG")
      ->check(writable_file());
  mask->callback([o, mask, &action] {
    if (o->spec.empty() && o->sudoku_size == 0) throw CLI::ValidationError("mask", "give --spec or --sudoku");
    action = [o] { show_mask(*o); };
  });

  CLI::App* inv = gsdm->add_subcommand(
      "invariance", "Check Theorem 3.1: is the mask invariant under an index permutation?");
  add_source_options(inv, *o);
  inv->add_option("--axis", o->axes, "ARRAY:AXIS permuted together (repeatable)")->required();
  inv->add_option("--permutation", o->permutation, "New position of each index value, e.g. 1,0,2")
      ->required();
  inv->callback([o, &action] {
    if (o->spec.empty() && o->sudoku_size == 0) throw CLI::ValidationError("invariance", "give --spec or --sudoku");
    action = [o] { check_invariance(*o); };
  });
}

}  // namespace structdiff::cli
