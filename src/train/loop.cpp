#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/loop_choices.h"
#include "train/step_parts.h"

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

// Metadata keys the loop itself writes; they are state, not configuration.
const std::set<std::string> kLoopStateKeys = {"data_rng"};

// The first field in which a checkpoint's metadata and this run's differ, as
// "model.heads is 4 in the checkpoint but 8 in this run"; "" if they agree.
std::string first_difference(const nlohmann::json& saved, const nlohmann::json& current,
                             const std::string& path) {
  if (saved.is_object() && current.is_object()) {
    std::set<std::string> keys;
    for (const auto& item : saved.items()) keys.insert(item.key());
    for (const auto& item : current.items()) keys.insert(item.key());
    for (const std::string& key : keys) {
      if (path.empty() && kLoopStateKeys.count(key)) continue;
      const std::string field = path.empty() ? key : path + "." + key;
      if (!saved.contains(key)) return field + " is absent in the checkpoint but " + current[key].dump() + " in this run";
      if (!current.contains(key)) return field + " is " + saved[key].dump() + " in the checkpoint but absent in this run";
      if (auto difference = first_difference(saved[key], current[key], field); !difference.empty()) {
        return difference;
      }
    }
    return "";
  }
  if (saved == current) return "";
  return (path.empty() ? std::string("the configuration") : path) + " is " + saved.dump() +
         " in the checkpoint but " + current.dump() + " in this run";
}

// SIGINT/SIGTERM during training only set this; the loop checkpoints and stops after the step.
volatile std::sig_atomic_t g_pending_signal = 0;

extern "C" void note_signal(int signal_number) { g_pending_signal = signal_number; }

// Routes SIGINT/SIGTERM to note_signal while alive. SA_RESETHAND: a second signal acts as usual,
// so a user can still stop a process that does not reach the end of its step.
class SignalCatcher {
 public:
  SignalCatcher() {
    g_pending_signal = 0;
    struct sigaction action {};
    action.sa_handler = note_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &action, &previous_interrupt_);
    sigaction(SIGTERM, &action, &previous_terminate_);
  }
  ~SignalCatcher() {
    sigaction(SIGINT, &previous_interrupt_, nullptr);
    sigaction(SIGTERM, &previous_terminate_, nullptr);
  }
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;
  int pending() const { return g_pending_signal; }

 private:
  struct sigaction previous_interrupt_ {}, previous_terminate_ {};
};

// Decay on matrices (weights of linear and convolution layers, embeddings) only: decaying biases
// and norm gains pulls them towards zero for no regularising benefit.
FusedAdamW make_optimizer(torch::nn::Module& model, const LoopOptions& options) {
  std::vector<torch::Tensor> matrices, others;
  for (const torch::Tensor& parameter : model.parameters()) {
    (parameter.dim() >= 2 ? matrices : others).push_back(parameter);
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto group = [&](std::vector<torch::Tensor> parameters, double decay) {
    if (parameters.empty()) return;
    groups.emplace_back(std::move(parameters),
                        std::make_unique<torch::optim::AdamWOptions>(
                            torch::optim::AdamWOptions(options.learning_rate)
                                .betas({0.9, 0.999})
                                .weight_decay(decay)));
  };
  group(std::move(matrices), options.weight_decay);
  group(std::move(others), 0.0);
  return FusedAdamW(std::move(groups),
                    torch::optim::AdamWOptions(options.learning_rate).weight_decay(0.0));
}

std::string checkpoint_clause(const LoopOptions& options, int64_t step) {
  if (options.checkpoint_path.empty()) return "no --checkpoint was given, so nothing is kept";
  if (!std::filesystem::exists(options.checkpoint_path)) {
    return "no checkpoint had been written yet";
  }
  return "the checkpoint " + options.checkpoint_path + " holds step " + std::to_string(step);
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

void check_loop_options(const LoopOptions& o) {
  auto fail = [](const std::string& option, const std::string& accepted, double value) {
    std::ostringstream text;
    text << option << " must be " << accepted << ", got " << value;
    throw std::invalid_argument(text.str());
  };
  if (o.steps < 1) fail("--train-steps", ">= 1", static_cast<double>(o.steps));
  if (!(std::isfinite(o.learning_rate) && o.learning_rate > 0)) fail("--lr", "a finite number > 0", o.learning_rate);
  if (!(std::isfinite(o.weight_decay) && o.weight_decay >= 0)) {
    fail("--weight-decay", "a finite number >= 0", o.weight_decay);
  }
  if (o.warmup_steps < 0) fail("--warmup", ">= 0", static_cast<double>(o.warmup_steps));
  // --clip 0 would freeze training, a negative limit would flip every gradient.
  if (!(o.clip_norm > 0)) fail("--clip", "a number > 0 (inf: no clipping)", o.clip_norm);
  if (!(o.ema_decay >= 0 && o.ema_decay < 1)) fail("--ema", "in [0, 1)", o.ema_decay);
  if (o.validate_every < 0) fail("--validate-every", ">= 0", static_cast<double>(o.validate_every));
  if (o.checkpoint_every < 0) fail("--checkpoint-every", ">= 0", static_cast<double>(o.checkpoint_every));
  if (!(std::isfinite(o.max_seconds) && o.max_seconds >= 0)) {
    fail("--max-minutes", "a finite number >= 0", o.max_seconds / 60.0);
  }
  if (o.checkpoint_path.empty() && (o.resume || o.checkpoint_every > 0)) {
    throw std::invalid_argument(std::string(o.resume ? "--resume" : "--checkpoint-every") +
                                " needs --checkpoint FILE");
  }
}

LoopOptions with_choices(LoopOptions options, const LoopChoices& choices) {
  options.steps = choices.steps.value_or(options.steps);
  options.learning_rate = choices.learning_rate.value_or(options.learning_rate);
  options.clip_norm = choices.clip_norm.value_or(options.clip_norm);
  options.validate_every = choices.validate_every.value_or(options.validate_every);
  return options;
}

torch::Tensor epoch_order(int64_t count, uint64_t seed, int64_t epoch) {
  // splitmix64 of (seed, epoch): neighbouring epochs and seeds get unrelated streams.
  uint64_t mixed = seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(epoch + 1);
  mixed = (mixed ^ (mixed >> 30)) * 0xbf58476d1ce4e5b9ULL;
  mixed = (mixed ^ (mixed >> 27)) * 0x94d049bb133111ebULL;
  mixed ^= mixed >> 31;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(mixed);
  return torch::randperm(count, generator, torch::kLong);
}

LoopResult run_training(const LoopTask& task, const LoopOptions& options, uint64_t data_seed) {
  if (task.model == nullptr || task.ema_model == nullptr || (!task.loss && !task.loss_parts)) {
    throw std::invalid_argument("run_training needs a model, an EMA model and a loss");
  }
  check_loop_options(options);
  // On several ranks every decision below is taken alike on all of them (see `agree`), so that no
  // rank waits for others that have stopped; rank 0 alone writes.
  Ranks* const ranks = options.ranks && options.ranks->size() > 1 ? options.ranks.get() : nullptr;
  const bool root = ranks == nullptr || ranks->is_root();
  if (ranks != nullptr && !task.loss_parts) {
    throw std::invalid_argument("this model trains on one process only so far, not on " +
                                std::to_string(ranks->size()) + " ranks");
  }
  using Clock = std::chrono::steady_clock;
  torch::nn::Module& model = *task.model;
  FusedAdamW optimizer = make_optimizer(model, options);
  Ema ema(model, options.ema_decay);
  std::mt19937_64 rng(data_seed);
  at::Generator noise = at::make_generator<at::CPUGeneratorImpl>(data_seed);
  int64_t step = 0;

  auto save = [&] {
    if (options.checkpoint_path.empty() || !root) return;
    nlohmann::json metadata = task.metadata;
    metadata["data_rng"] = rng_state(rng);
    CheckpointParts parts{&model, &optimizer, &ema, &noise, task.state, step, metadata};
    save_checkpoint(options.checkpoint_path, parts);
  };
  const bool resuming = options.resume && std::filesystem::exists(options.checkpoint_path);
  if (resuming) {
    const nlohmann::json saved = read_checkpoint_metadata(options.checkpoint_path);
    if (const auto difference = first_difference(saved, task.metadata, ""); !difference.empty()) {
      throw std::invalid_argument("cannot resume from " + options.checkpoint_path + ": " + difference);
    }
    CheckpointParts parts{&model, &optimizer, &ema, &noise, task.state, 0, {}};
    load_checkpoint(options.checkpoint_path, parts);
    step = parts.step;
    restore_rng(rng, parts.metadata.at("data_rng").get<std::string>());
  }

  if (ranks != nullptr) {
    // The same initial (or resumed) weights everywhere, whatever each rank built.
    std::vector<torch::Tensor> state = model.parameters();
    for (const torch::Tensor& buffer : model.buffers()) state.push_back(buffer);
    ranks->broadcast(state);
  }

  std::optional<JsonlLog> log;
  if (!options.log_path.empty() && root) {
    if (resuming) truncate_log_after_step(options.log_path, step);
    log.emplace(options.log_path, /*append=*/resuming);
  }
  std::optional<ProgressBar> bar;
  if (options.show_progress && root) {
    bar.emplace(options.progress_label, options.steps, step);
    if (options.max_seconds > 0) bar->set_time_limit(options.max_seconds);
  }

  const SignalCatcher signals;
  double communication = 0;
  std::deque<double> recent;
  std::map<std::string, double> shown;  // the bar's values: the loss, the last validation's numbers
  const int64_t first_step = step;
  int64_t saved_step = step;
  const auto started = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - started).count(); };
  auto copy_ema = [&] {
    ema.copy_to(*task.ema_model);
    task.ema_model->eval();
  };
  auto stop_unless_finite = [&](const char* what, double value) {
    if (std::isfinite(value)) return;
    if (bar) bar->finish();
    std::ostringstream text;
    text << "training stopped: the " << what << " at step " << step + 1 << " is " << value << "; "
         << checkpoint_clause(options, saved_step) << " and no model was written";
    throw TrainingStopped(text.str(), 1);
  };
  model.train();
  while (step < options.steps) {
    const auto step_started = Clock::now();
    const double rate =
        learning_rate_at(options.learning_rate, options.decay, options.warmup_steps, step, options.steps);
    for (auto& group : optimizer.param_groups()) {
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(rate);
    }
    optimizer.zero_grad();
    double value = 0;
    if (task.loss_parts) {
      const std::vector<Shard> parts =
          step_parts(model, ranks ? Shard{ranks->rank(), ranks->size()} : Shard{});
      value = forward_backward(task.loss_parts(step, rng, noise, parts), model);
      if (ranks == nullptr) stop_unless_finite("loss", value);
    } else {
      const torch::Tensor loss = task.loss(step, rng, noise);
      value = loss.item<double>();
      stop_unless_finite("loss", value);
      loss.backward();
    }
    if (ranks != nullptr) {
      // The shards' mean losses and gradients, averaged: the whole batch's (a non-finite one on any
      // rank makes both non-finite everywhere, so all stop together).
      std::vector<torch::Tensor> gradients;
      for (const torch::Tensor& parameter : model.parameters()) {
        if (parameter.grad().defined()) gradients.push_back(parameter.grad());
      }
      const auto communication_started = Clock::now();
      ranks->average(gradients);
      value = ranks->sum({value})[0] / ranks->size();
      communication += std::chrono::duration<double>(Clock::now() - communication_started).count();
      stop_unless_finite("loss", value);
    }
    const double grad_norm = clip_gradient_norm(model.parameters(), options.clip_norm);
    stop_unless_finite("gradient norm", grad_norm);
    optimizer.step();
    ema.update(model);
    ++step;
    bool keep_going =
        !task.on_step ||
        task.on_step(step, std::chrono::duration<double>(Clock::now() - step_started).count());

    recent.push_back(value);
    if (recent.size() > 100) recent.pop_front();
    shown["loss"] = value;
    if (bar) bar->update(step, shown);
    if (log) {
      log->write({{"step", step}, {"loss", value}, {"grad_norm", grad_norm}, {"lr", rate},
                  {"seconds", elapsed()}});
    }
    if (options.validate_every > 0 && step % options.validate_every == 0 && task.validate && root) {
      copy_ema();
      nlohmann::json metrics = task.validate();
      model.train();
      for (const auto& item : metrics.items()) {
        if (item.value().is_number()) shown[item.key()] = item.value().get<double>();
      }
      if (task.stop_after && task.stop_after(metrics)) keep_going = false;
      metrics["step"] = step;
      metrics["seconds"] = elapsed();
      if (log) log->write(metrics);
    }
    if (options.checkpoint_every > 0 && step % options.checkpoint_every == 0) {
      save();
      saved_step = step;
    }
    bool out_of_time = options.max_seconds > 0 && elapsed() >= options.max_seconds;
    int signal_number = signals.pending();
    if (ranks != nullptr) {
      // One vote per rank: a signal on any rank, or rank 0's validation or clock, stops them all.
      const auto communication_started = Clock::now();
      const std::vector<double> votes =
          ranks->sum({signal_number == SIGINT ? 1.0 : 0.0, signal_number == SIGTERM ? 1.0 : 0.0,
                      keep_going ? 0.0 : 1.0, root && out_of_time ? 1.0 : 0.0});
      signal_number = votes[0] > 0 ? SIGINT : votes[1] > 0 ? SIGTERM : 0;
      keep_going = votes[2] == 0;
      out_of_time = votes[3] > 0;
      communication += std::chrono::duration<double>(Clock::now() - communication_started).count();
    }
    if (signal_number != 0) {
      if (bar) bar->finish();
      save();
      const std::string name = signal_number == SIGINT ? "SIGINT" : "SIGTERM";
      throw TrainingStopped("interrupted by " + name + " after step " + std::to_string(step) + "; " +
                                (options.checkpoint_path.empty()
                                     ? "no --checkpoint was given, so nothing is kept"
                                     : "the checkpoint " + options.checkpoint_path + " holds it (continue with --resume)"),
                            128 + signal_number);
    }
    if (out_of_time || !keep_going) break;
  }
  if (bar) bar->finish();
  save();
  copy_ema();
  LoopResult result;
  result.steps_done = step;
  result.steps_this_run = step - first_step;
  result.seconds = elapsed();
  result.communication_seconds = communication;
  result.final_loss = recent.empty() ? 0.0
                                     : std::accumulate(recent.begin(), recent.end(), 0.0) /
                                           static_cast<double>(recent.size());
  return result;
}

}  // namespace structdiff::train
