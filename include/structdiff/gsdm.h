// Graphically structured diffusion model (GSDM): a denoiser whose attention follows a graphical
// model's edges, one token per variable. The diffused state of a batch is a flat
// (batch, state_width) tensor: each variable's value in node order, 1 entry for a continuous
// variable and a one-hot block for a discrete one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "structdiff/attention.h"
#include "structdiff/diffusion.h"
#include "structdiff/graph.h"

namespace structdiff::gsdm {

enum class EmbeddingKind { independent, array, exchangeable };  // IE, AE, EE (paper §3.2)
enum class NormKind { token, group };  // per-token LayerNorm | the reference's GroupNorm(32)

struct GsdmConfig {
  int64_t dim = 128;
  int64_t blocks = 6;  // (ResNet block, attention block) pairs
  int64_t heads = 8;
  EmbeddingKind embedding = EmbeddingKind::array;
  NormKind norm = NormKind::token;
  // The reference scales attention scores by 1/sqrt(head_dim) only on its dense path; `none`
  // reproduces its sparse path.
  Scaling attention_scaling = Scaling::inverse_sqrt_dim;
  // norm -> swish before the output projections (the project's choice); false: straight from the
  // last attention block, as the reference does.
  bool output_norm = true;
  // swish on the time embedding before each ResNet block's projection of it, as the reference
  // does (temb_proj(swish(temb))); false: the projection takes it as is.
  bool time_swish = false;
  // Standard deviation of the observed-value embedding's initial draw (the reference draws N(0, 1)).
  double observed_embedding_init = 0.02;
  // structured: the graphical model's mask, by the fused kernel or masked dense attention as the
  // core's cost model picks; sparse: the mask with the fused kernel always; gather: the same mask,
  // packed; dense: no mask at all (the unstructured baseline on the same code path).
  Mechanism attention = Mechanism::structured;
  // The graphical model's mask or one of the paper's ablations of it (sparse and gather only).
  graph::MaskOptions mask;
};
// As every configuration: `nlohmann::json(config)` and `j.get<GsdmConfig>()` (missing or
// mistyped keys throw).
void to_json(nlohmann::json& j, const GsdmConfig& config);
void from_json(const nlohmann::json& j, GsdmConfig& config);
EmbeddingKind parse_embedding(const std::string& name);  // "IE" | "AE" | "EE"
NormKind parse_norm(const std::string& name);            // "token" | "group"
Scaling parse_attention_scaling(const std::string& name);  // "inverse-sqrt-dim" | "none"
std::string attention_scaling_name(Scaling scaling);

// Where each node's values sit in the flat state.
struct StateLayout {
  explicit StateLayout(const graph::GraphicalModel& model);
  int64_t width = 0;                 // total entries per example
  std::vector<int64_t> node_offset;  // first entry of each node
  std::vector<int64_t> node_width;   // 1 or the number of options
  // Entry-level mask (batch, width) from a node-level mask (batch, nodes).
  torch::Tensor expand_node_mask(const torch::Tensor& node_mask) const;
  torch::Tensor entry_to_node;  // (width,) int64
};

class ResBlockImpl;
class AttentionBlockImpl;
class TokenNormImpl;

// One group of nodes sharing an input/output projection: all variables with the same width
// (and, for width 1, continuity).
struct ArityGroup {
  int64_t width = 1;
  bool discrete = false;
  int64_t projection = 0;  // index into the model's input and output projections
  torch::Tensor nodes;     // (n,) int64 node ids
  torch::Tensor entries;   // (n * width,) int64 flat-state entries, node-major
};

// What a GSDM takes from one graphical model: the state layout, the attention pattern, and each
// node's projection, embedding row and index code. The learned parameters do not depend on it
// (with AE or EE embeddings), so one model runs on the graphs of every size of a problem.
struct GsdmStructure {
  GsdmStructure(const graph::GraphicalModel& model, const graph::MaskOptions& mask,
                bool needs_pattern);
  StateLayout layout;
  int64_t num_nodes = 0;
  AttentionPattern pattern;
  std::unique_ptr<PatternBatch> pattern_batch;  // null for dense attention
  std::vector<ArityGroup> groups;
  torch::Tensor embedding_index;   // (nodes,) row of the node table per node
  torch::Tensor sinusoidal_codes;  // (nodes, dim): AE index codes, zeros otherwise
  // Where the tensors above live; the model moves its structure to its inputs' device on use
  // (the pattern follows by itself).
  torch::Device device = torch::kCPU;
  void move_to(torch::Device target);
};

class GsdmImpl : public torch::nn::Module {
 public:
  GsdmImpl(const graph::GraphicalModel& model, GsdmConfig config);

  // x_t: (batch, width) noisy state with observed entries already replaced by their values;
  // t: (batch,) int64; observed: (batch, nodes) bool, all on the model's device. Returns the x0
  // estimate (batch, width), a probability vector for each discrete variable. Runs on the
  // structure in use.
  torch::Tensor forward(const torch::Tensor& x_t, const torch::Tensor& t,
                        const torch::Tensor& observed);

  // The structure of another graph of the same problem (another size) for these parameters.
  // Throws std::invalid_argument when the graph needs what the parameters lack: IE embeddings
  // (a row per variable), another number of embedding rows, or a variable width without a
  // projection.
  std::shared_ptr<GsdmStructure> structure_for(const graph::GraphicalModel& model) const;
  // Runs forward (and sample, training_loss) on `structure` from now on; the graph the model was
  // built on is `home_structure()`.
  void use_structure(std::shared_ptr<GsdmStructure> structure);
  const std::shared_ptr<GsdmStructure>& structure() const { return structure_; }
  const std::shared_ptr<GsdmStructure>& home_structure() const { return home_; }

  const GsdmConfig& config() const { return config_; }
  const StateLayout& layout() const { return structure_->layout; }
  const AttentionPattern& pattern() const { return structure_->pattern; }
  int64_t num_nodes() const { return structure_->num_nodes; }

 private:
  // Fills the structure's projections, embedding rows and codes; returns the table rows it needs.
  int64_t assign_embeddings(const graph::GraphicalModel& model, GsdmStructure& structure) const;

  GsdmConfig config_;
  std::map<std::pair<int64_t, bool>, int64_t> projection_of_arity_;  // (width, discrete) -> index
  int64_t table_rows_ = 0;
  std::shared_ptr<GsdmStructure> home_, structure_;
  torch::nn::Embedding node_table_{nullptr};
  torch::Tensor observed_embedding_;
  torch::nn::ModuleList input_proj_, output_proj_;
  torch::nn::Linear time_in_{nullptr}, time_out_{nullptr};
  std::vector<std::shared_ptr<ResBlockImpl>> res_blocks_;
  std::vector<std::shared_ptr<AttentionBlockImpl>> attention_blocks_;
  std::shared_ptr<TokenNormImpl> final_norm_;  // null without output_norm
};
TORCH_MODULE(Gsdm);

// The denoiser as the samplers see it: observed entries are written into x_t before the network
// and over its output, so they stay clamped at every step (paper §2.1, §3.4).
diffusion::ModelFn conditioned_model(Gsdm model, torch::Tensor observed_nodes,
                                     torch::Tensor observed_values);
// Mean over the batch of the summed squared x0 error on latent entries (observed ones carry no
// loss), with antithetic t; t and the noise come from `generator`. Computed on the model's
// device, wherever x0 and observed_nodes live.
torch::Tensor training_loss(Gsdm model, const diffusion::NoiseSchedule& schedule,
                            const torch::Tensor& x0, const torch::Tensor& observed_nodes,
                            at::Generator generator);
// The batch's t (antithetic) and noise as training_loss draws them, on the model's device.
diffusion::TrainingExample training_example(Gsdm model, const diffusion::NoiseSchedule& schedule,
                                            const torch::Tensor& x0, at::Generator generator);
// The same loss over rows [begin, end) of the batch only (a part of a step split across threads
// or ranks), `whole` being the batch's training_example: each row gets what the whole-batch loss
// gives it.
torch::Tensor training_loss(Gsdm model, const diffusion::NoiseSchedule& schedule,
                            const torch::Tensor& x0, const torch::Tensor& observed_nodes,
                            const diffusion::TrainingExample& whole, int64_t begin, int64_t end);
// One-hot blocks to values: argmax for discrete variables, the value for continuous ones.
// Returns (batch, nodes) float: discrete entries hold the option index.
torch::Tensor decode_state(const StateLayout& layout, const graph::GraphicalModel& model,
                           const torch::Tensor& state);
// The inverse: (batch, nodes) values to the flat state, each discrete option index as a one-hot
// block. Throws std::invalid_argument for an index outside a variable's options.
torch::Tensor encode_state(const StateLayout& layout, const graph::GraphicalModel& model,
                           const torch::Tensor& values);

enum class Sampler { ancestral, ddim };
Sampler parse_sampler(const std::string& name);  // "ancestral" | "ddim"

struct SampleOptions {
  Sampler sampler = Sampler::ddim;
  int64_t ddim_steps = 50;
  // Stochastic DDIM (see diffusion::SamplerOptions): on 9x9 Sudoku it solves 4-25 points more
  // puzzles than eta = 0 at the same cost (docs/results/gsdm-sudoku.md).
  double ddim_eta = 1.0;
  diffusion::ProgressFn progress;
  // The starting noise and the sampler's noise; required. Reusing one generator across calls
  // continues its stream, so a sequence of calls is reproducible from one seed.
  at::Generator generator;
};
// One sample (batch, width) of the latent variables given the observed ones, which stay clamped
// at every step. Only the observed entries of `observed_values` are read (a complete example may
// be passed). Runs without gradients, on the model's device; the inputs may live elsewhere, and
// the result comes back on observed_values' device.
torch::Tensor sample(Gsdm model, const diffusion::NoiseSchedule& schedule,
                     const torch::Tensor& observed_nodes, const torch::Tensor& observed_values,
                     const SampleOptions& options);

}  // namespace structdiff::gsdm
