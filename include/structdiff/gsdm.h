// Graphically structured diffusion model (GSDM): a denoiser whose attention follows a graphical
// model's edges, one token per variable. The diffused state of a batch is a flat
// (batch, state_width) tensor: each variable's value in node order, 1 entry for a continuous
// variable and a one-hot block for a discrete one.
#pragma once

#include <cstdint>
#include <functional>
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
#include "structdiff/mask_schedule.h"

namespace structdiff::gsdm {

enum class EmbeddingKind { independent, array, exchangeable };  // IE, AE, EE (paper §3.2)
enum class NormKind { token, group };  // per-token LayerNorm | the reference's GroupNorm(32)
// How discrete variables are diffused: as one-hot vectors under Gaussian noise (the paper), or
// masked (absorbing state; continuous variables keep Gaussian noise under the same time).
enum class DiffusionProcess { gaussian, masked };
// The masked process's loss: the continuous-time ELBO (cross-entropy on masked variables weighted
// by -alpha'(t) / (1 - alpha(t))), or the plain cross-entropy on masked variables.
enum class MaskedLoss { elbo, unweighted };

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
  DiffusionProcess process = DiffusionProcess::gaussian;
  diffusion::MaskScheduleKind mask_schedule = diffusion::MaskScheduleKind::cosine;  // masked only
  MaskedLoss masked_loss = MaskedLoss::elbo;                                       // masked only
};
// As every configuration: `nlohmann::json(config)` and `j.get<GsdmConfig>()` (missing or
// mistyped keys throw).
void to_json(nlohmann::json& j, const GsdmConfig& config);
void from_json(const nlohmann::json& j, GsdmConfig& config);
EmbeddingKind parse_embedding(const std::string& name);  // "IE" | "AE" | "EE"
std::vector<std::string> embedding_names();  // the names each parse_X accepts, in order
NormKind parse_norm(const std::string& name);            // "token" | "group"
std::vector<std::string> norm_names();
Scaling parse_attention_scaling(const std::string& name);  // "inverse-sqrt-dim" | "none"
std::vector<std::string> attention_scaling_names();
std::string attention_scaling_name(Scaling scaling);
DiffusionProcess parse_process(const std::string& name);  // "gaussian" | "masked"
std::vector<std::string> process_names();
std::string process_name(DiffusionProcess process);
MaskedLoss parse_masked_loss(const std::string& name);  // "elbo" | "unweighted"
std::vector<std::string> masked_loss_names();
std::string masked_loss_name(MaskedLoss loss);

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
  // Query-key pairs one head attends per example: the pattern's entries, or nodes^2 when dense.
  double attended_pairs() const {
    return pattern_batch ? static_cast<double>(pattern.num_entries())
                         : static_cast<double>(num_nodes) * static_cast<double>(num_nodes);
  }
};

// About the bytes of a GSDM's weights for `config` on a graph of `nodes` variables: (8 per block
// + 2) dim x dim, and per node an embedding row and an index code, 4 bytes each. Size gates reckon
// with it before a model is built.
double weight_bytes(const GsdmConfig& config, int64_t nodes);
// About the bytes one block's activations take per example on a graph of `nodes` variables whose
// attention covers `attended_pairs` query-key pairs: `floats_per_node` (nodes x dim) floats and
// 3 (pairs x heads) attention weights, 4 bytes each. Training keeps every block's (about 16 floats
// per node); sampling needs one block's at a time (about 8).
double block_activation_bytes(const GsdmConfig& config, double nodes, double attended_pairs,
                              double floats_per_node);

class GsdmImpl : public torch::nn::Module {
 public:
  GsdmImpl(const graph::GraphicalModel& model, GsdmConfig config);

  // x_t: (batch, width) noisy state with observed entries already replaced by their values (a
  // masked discrete variable is an all-zero block); t: (batch,) int64; observed: (batch, nodes)
  // bool, all on the model's device. Returns the x0 estimate (batch, width): a probability
  // vector for each discrete variable, or its logits with `discrete_logits`. Runs on the
  // structure in use.
  torch::Tensor forward(const torch::Tensor& x_t, const torch::Tensor& t,
                        const torch::Tensor& observed, bool discrete_logits = false);

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
                                     torch::Tensor observed_values, bool discrete_logits = false);
// Mean over the batch of the summed squared x0 error on latent entries (observed ones carry no
// loss), with antithetic t; t and the noise come from `generator`. Computed on the model's
// device, wherever x0 and observed_nodes live. A masked-process model (config().process) adds,
// for its discrete variables, the masked cross-entropy (masked_training_loss below) in place of
// their squared error.
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

// ancestral: every step of the Gaussian process, or for the masked one, at each of `ddim_steps`
// steps unmask what the schedule says with values drawn from the prediction; ddim: Gaussian
// only; adaptive: masked only, each step unmask the latent variables the model is most confident
// of. model_default: ddim for a Gaussian model, adaptive for a masked one.
enum class Sampler { model_default, ancestral, ddim, adaptive };
Sampler parse_sampler(const std::string& name);  // "" (model_default) | "ancestral" | "ddim" | "adaptive"
std::vector<std::string> sampler_names();  // without ""
std::string sampler_name(Sampler sampler);
// The sampler that runs: `requested`, or for model_default the process's own.
Sampler resolve_sampler(Sampler requested, DiffusionProcess process);
// The adaptive sampler's confidence in a variable: the probability of the value it takes, or its
// margin over the most probable other value (at temperature 0 the top-two margin; negative for a
// draw that is not the most probable value, so such a draw is decided last). by_temperature:
// margin at temperature 0, probability above; chosen on validation Sudokus (seed 2), where the
// margin solved 2-3 points more puzzles in one deterministic pass and the probability made 2 points
// more valid grids from nothing at temperature 1 (docs/results/gsdm-sudoku.md).
enum class Confidence { by_temperature, probability, margin };
// "" (by_temperature) | "probability" | "margin"
Confidence parse_confidence(const std::string& name);
std::vector<std::string> confidence_names();  // without ""

struct SampleOptions {
  Sampler sampler = Sampler::model_default;
  int64_t ddim_steps = 50;  // the masked samplers' steps too
  // Stochastic DDIM (see diffusion::SamplerOptions): on 9x9 Sudoku it solves 4-25 points more
  // puzzles than eta = 0 at the same cost (docs/results/gsdm-sudoku.md).
  double ddim_eta = 1.0;
  // Masked process: the values' temperature (0: the most probable value); the adaptive
  // sampler's confidence, and how many variables per example it unmasks each step (0: as the
  // schedule spreads the latent ones over ddim_steps; one at a time solved 100 of 100 validation
  // Sudokus from nothing, the schedule's pace at temperature 1 none: docs/results/gsdm-sudoku.md);
  // remask: each step but the last, up to this many decided variables per example whose value
  // has fallen below probability 1/2 return to the mask (ReMDM-style revision; 0: never). With
  // unmask_per_step > 0 on a graph of discrete variables only, sampling then goes on past the
  // pass that decides every variable until the model doubts none of an example's values, for
  // as many steps again at most. order_noise: the adaptive sampler ranks each confidence plus
  // this times standard Gumbel noise (random::gumbel), so draws at temperature 0 take different
  // orders while each value is still the most probable; 0: strictly the most confident first.
  double temperature = 0.0;
  Confidence confidence = Confidence::by_temperature;
  int64_t unmask_per_step = 1;
  int64_t remask = 0;
  double order_noise = 0.0;
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

// ---- the masked process's parts (gsdm_masked.cpp), public for tests ----------------------------

// The network as the masked samplers see it: for state x_t at steps t (int64, (batch,)) the x0
// estimate of continuous entries and the logits of discrete ones (GsdmImpl::forward with
// discrete_logits), observed entries clamped.
using MaskedModelFn = std::function<torch::Tensor(const torch::Tensor& x_t, const torch::Tensor& t)>;
// One sample by the masked process: observed entries of `observed_values` stay, latent discrete
// variables start masked, latent continuous entries start from `noise`. `structure` says which
// entries are discrete; the Gaussian part steps along the DDIM grid of `schedule`.
torch::Tensor sample_masked(const MaskedModelFn& model, const GsdmStructure& structure,
                            const diffusion::NoiseSchedule& schedule,
                            diffusion::MaskScheduleKind mask_schedule,
                            const torch::Tensor& observed_nodes, const torch::Tensor& observed_values,
                            const torch::Tensor& noise, const SampleOptions& options);
// The masked process's loss for rows whose example is `example` (t, noise as the Gaussian
// process draws them): each latent discrete variable is masked with probability 1 - alpha(t)
// (t = (step + 1) / T), decided by its first entry's noise; returns the batch mean of the summed
// weighted cross-entropy on masked variables plus the squared x0 error of latent continuous
// entries. `network` maps (x_t, t) to the output MaskedModelFn describes.
// The adaptive sampler's confidence (see Confidence) in each proposed value: `probabilities`
// (..., width), `proposal` (...) of indices into the last dimension.
torch::Tensor proposal_confidence(const torch::Tensor& probabilities, const torch::Tensor& proposal,
                                  Confidence confidence);
torch::Tensor masked_training_loss(const MaskedModelFn& network, const GsdmStructure& structure,
                                   const diffusion::NoiseSchedule& schedule,
                                   diffusion::MaskScheduleKind mask_schedule, MaskedLoss loss,
                                   const torch::Tensor& x0, const torch::Tensor& observed_nodes,
                                   const diffusion::TrainingExample& example);

}  // namespace structdiff::gsdm
