#include "structdiff/gsdm_training.h"

#include <chrono>
#include <deque>
#include <filesystem>
#include <numeric>
#include <optional>
#include <sstream>

#include <torch/torch.h>

#include "structdiff/train.h"

namespace structdiff::gsdm {
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

TrainingResult train(Gsdm model, Gsdm ema_model, const diffusion::NoiseSchedule& schedule,
                     const TrainingProblem& problem, const TrainingOptions& options,
                     uint64_t data_seed) {
  using Clock = std::chrono::steady_clock;
  torch::optim::Adam optimizer(model->parameters(),
                               torch::optim::AdamOptions(options.learning_rate).betas({0.9, 0.999}));
  train::Ema ema(*model, options.ema_decay);
  std::mt19937_64 rng(data_seed);
  int64_t step = 0;

  auto save = [&] {
    if (options.checkpoint_path.empty()) return;
    nlohmann::json metadata = problem.metadata;
    metadata["data_rng"] = rng_state(rng);
    train::save_checkpoint(options.checkpoint_path, {model.get(), &optimizer, &ema, step, metadata});
  };
  if (options.resume && !options.checkpoint_path.empty() &&
      std::filesystem::exists(options.checkpoint_path)) {
    train::CheckpointParts parts{model.get(), &optimizer, &ema, 0, {}};
    train::load_checkpoint(options.checkpoint_path, parts);
    step = parts.step;
    restore_rng(rng, parts.metadata.at("data_rng").get<std::string>());
  }

  std::optional<train::JsonlLog> log;
  if (!options.log_path.empty()) log.emplace(options.log_path, /*append=*/options.resume);
  std::optional<train::ProgressBar> bar;
  if (options.show_progress) bar.emplace("train", options.steps, step);

  std::deque<double> recent;
  const auto started = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - started).count(); };
  model->train();
  while (step < options.steps) {
    TrainingBatch batch = problem.make_batch(options.batch, rng);
    optimizer.zero_grad();
    torch::Tensor loss = training_loss(model, schedule, batch.x0, batch.observed);
    loss.backward();
    const double grad_norm =
        torch::nn::utils::clip_grad_norm_(model->parameters(), options.clip_norm);
    optimizer.step();
    ema.update(*model);
    ++step;

    const double value = loss.item<double>();
    recent.push_back(value);
    if (recent.size() > 100) recent.pop_front();
    if (bar) bar->update(step, {{"loss", value}});
    if (log) log->write({{"step", step}, {"loss", value}, {"grad_norm", grad_norm}, {"seconds", elapsed()}});

    const bool validate_now = options.validate_every > 0 && step % options.validate_every == 0;
    if (validate_now && problem.validate) {
      ema.copy_to(*ema_model);
      ema_model->eval();
      nlohmann::json metrics = problem.validate(ema_model);
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
  ema.copy_to(*ema_model);
  ema_model->eval();
  TrainingResult result;
  result.steps_done = step;
  result.seconds = elapsed();
  result.final_loss = recent.empty() ? 0.0
                                     : std::accumulate(recent.begin(), recent.end(), 0.0) /
                                           static_cast<double>(recent.size());
  return result;
}

}  // namespace structdiff::gsdm
