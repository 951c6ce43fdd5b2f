// Model files: a model's weights with its kind, configuration and provenance, so a file loads
// without its command line; `structdiff model info` reads them.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

namespace structdiff::train {

// One layout for every model file's metadata: "kind" ("sudoku", "ddpm", "classifier", ...),
// "config" (all that builds the model: what its loader reads) and, beside them, what the trainer
// records (data, accuracies, steps). Every reader of a file's metadata gets this layout:
// current_model_layout reads each older one (the configuration under "unet" or "model", or no
// "kind" at all) as if written today, so shipped files keep loading.
nlohmann::json current_model_layout(nlohmann::json metadata);
// The kind `metadata` declares, or "unknown".
std::string model_kind(const nlohmann::json& metadata);
// Throws std::runtime_error unless `metadata` (read from `path`) is of `kind`, naming both.
void require_model_kind(const nlohmann::json& metadata, const std::string& kind,
                        const std::string& path);

// Where a model file came from: git commit, command line, seed, threads, libtorch version and
// UTC date. The command line and seed are those given to set_run_description (empty and 0 for a
// program that never called it, e.g. a test).
nlohmann::json provenance();
void set_run_description(const std::string& command_line, uint64_t seed);

// What `structdiff model info` prints: kind, config, recorded (the rest of the metadata),
// provenance, parameter count, "resumable" (a checkpoint for --resume), "step" (a checkpoint's
// step; for a model file the trainer's recorded "trained_steps", null where it recorded none) and
// "weights_sha256", a SHA-256 over the model's tensors (names, dtypes, shapes, bytes), computed
// from the file alone.
nlohmann::json model_info(const std::string& path);
// Writes `model`'s weights with `metadata` (its "config" and what the caller records, e.g.
// accuracies; std::logic_error without "config") plus "kind", atomically, in save_checkpoint's
// format.
void save_model_file(const std::string& path, const std::string& kind, torch::nn::Module& model,
                     nlohmann::json metadata);
// Builds a model with `build` from the metadata of the model file at `path` and loads its
// weights. Checks the kind first (std::runtime_error naming the path and both kinds), builds
// without disturbing libtorch's default generator (initial weights draw from it), and leaves the
// model in eval mode. Returns the metadata.
nlohmann::json load_model_file(const std::string& path, const std::string& kind,
                               const std::function<torch::nn::Module&(const nlohmann::json&)>& build);

// The pair above for a model whose config() builds it alone (Tracformer, the UNN models, ...).
// `Holder` is the model's TORCH_MODULE holder; its configuration type converts to and from JSON.
template <typename Holder>
void save_configured_model(const std::string& path, const std::string& kind, Holder& model,
                           nlohmann::json metadata) {
  metadata["config"] = model->config();
  save_model_file(path, kind, *model, std::move(metadata));
}
// Throws std::runtime_error naming the path when the stored configuration is incomplete or
// malformed. `metadata`, if given, receives the file's.
template <typename Holder>
Holder load_configured_model(const std::string& path, const std::string& kind,
                             nlohmann::json* metadata = nullptr) {
  using Config = std::decay_t<decltype(std::declval<typename Holder::ContainedType&>().config())>;
  Holder model{nullptr};
  nlohmann::json read =
      load_model_file(path, kind, [&](const nlohmann::json& stored) -> torch::nn::Module& {
        try {
          model = Holder(stored.at("config").get<Config>());
        } catch (const nlohmann::json::exception& e) {
          throw std::runtime_error(path + ": the model's configuration is incomplete or malformed (" +
                                   std::string(e.what()) + ")");
        }
        return *model;
      });
  if (metadata != nullptr) *metadata = std::move(read);
  return model;
}

}  // namespace structdiff::train
