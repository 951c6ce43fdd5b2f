#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <numeric>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <torch/torch.h>

#include "structdiff/train.h"

namespace structdiff::train {
namespace {

std::string rng_state(const std::mt19937_64& rng) {
  std::ostringstream out;
  out << rng;
  return out.str();
}

void restore_rng(std::mt19937_64& rng, const std::string& state) {
  std::istringstream in(state);
  in >> rng;
  if (!in) throw std::runtime_error("checkpoint holds an unreadable data generator state");
}

}  // namespace

LearningRateDecay parse_learning_rate_decay(const std::string& name) {
  if (name == "constant") return LearningRateDecay::constant;
  if (name == "cosine") return LearningRateDecay::cosine;
  throw std::invalid_argument("unknown learning-rate decay '" + name +
                              "' (choose constant or cosine)");
}

double learning_rate_at(double base, LearningRateDecay decay, int64_t warmup_steps, int64_t step,
                        int64_t total_steps) {
  double rate = base;
  if (step < warmup_steps) rate *= static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (decay == LearningRateDecay::cosine && total_steps > 0) {
    const double progress = std::min(1.0, static_cast<double>(step) / static_cast<double>(total_steps));
    rate *= 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return rate;
}

LoopResult run_training(const LoopTask& task, const LoopOptions& options, uint64_t data_seed) {
  if (task.model == nullptr || task.ema_model == nullptr || !task.loss) {
    throw std::invalid_argument("run_training needs a model, an EMA model and a loss");
  }
  using Clock = std::chrono::steady_clock;
  torch::nn::Module& model = *task.model;
  torch::optim::Adam optimizer(model.parameters(),
                               torch::optim::AdamOptions(options.learning_rate).betas({0.9, 0.999}));
  Ema ema(model, options.ema_decay);
  std::mt19937_64 rng(data_seed);
  int64_t step = 0;

  auto save = [&] {
    if (options.checkpoint_path.empty()) return;
    nlohmann::json metadata = task.metadata;
    metadata["data_rng"] = rng_state(rng);
    save_checkpoint(options.checkpoint_path, {&model, &optimizer, &ema, step, metadata});
  };
  if (options.resume && !options.checkpoint_path.empty() &&
      std::filesystem::exists(options.checkpoint_path)) {
    CheckpointParts parts{&model, &optimizer, &ema, 0, {}};
    load_checkpoint(options.checkpoint_path, parts);
    step = parts.step;
    restore_rng(rng, parts.metadata.at("data_rng").get<std::string>());
  }

  std::optional<JsonlLog> log;
  if (!options.log_path.empty()) log.emplace(options.log_path, /*append=*/options.resume);
  std::optional<ProgressBar> bar;
  if (options.show_progress) {
    bar.emplace("train", options.steps, step);
    if (options.max_seconds > 0) bar->set_time_limit(options.max_seconds);
  }

  std::deque<double> recent;
  const int64_t first_step = step;
  const auto started = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - started).count(); };
  auto copy_ema = [&] {
    ema.copy_to(*task.ema_model);
    task.ema_model->eval();
  };
  model.train();
  while (step < options.steps) {
    const double rate =
        learning_rate_at(options.learning_rate, options.decay, options.warmup_steps, step, options.steps);
    for (auto& group : optimizer.param_groups()) {
      static_cast<torch::optim::AdamOptions&>(group.options()).lr(rate);
    }
    optimizer.zero_grad();
    torch::Tensor loss = task.loss(rng);
    loss.backward();
    const double grad_norm = torch::nn::utils::clip_grad_norm_(model.parameters(), options.clip_norm);
    optimizer.step();
    ema.update(model);
    ++step;

    const double value = loss.item<double>();
    recent.push_back(value);
    if (recent.size() > 100) recent.pop_front();
    if (bar) bar->update(step, {{"loss", value}});
    if (log) {
      log->write({{"step", step}, {"loss", value}, {"grad_norm", grad_norm}, {"lr", rate},
                  {"seconds", elapsed()}});
    }
    if (options.validate_every > 0 && step % options.validate_every == 0 && task.validate) {
      copy_ema();
      nlohmann::json metrics = task.validate();
      model.train();
      metrics["step"] = step;
      metrics["seconds"] = elapsed();
      if (log) log->write(metrics);
      if (bar) std::fprintf(stderr, "\nvalidation at step %ld: %s\n", static_cast<long>(step), metrics.dump().c_str());
    }
    if (options.checkpoint_every > 0 && step % options.checkpoint_every == 0) save();
    if (options.max_seconds > 0 && elapsed() >= options.max_seconds) break;
  }
  if (bar) bar->finish();
  save();
  copy_ema();
  LoopResult result;
  result.steps_done = step;
  result.steps_this_run = step - first_step;
  result.seconds = elapsed();
  result.final_loss = recent.empty() ? 0.0
                                     : std::accumulate(recent.begin(), recent.end(), 0.0) /
                                           static_cast<double>(recent.size());
  return result;
}

}  // namespace structdiff::train
