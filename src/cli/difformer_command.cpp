// `structdiff difformer train`: semi-supervised node classification with DIFFormer or a baseline
// (MLP, GCN, GAT, Transformer) on a CSBM graph, Fashion-MNIST, the citation graphs Cora and
// Citeseer, or a Planetoid-style directory (difformer::run_study; the defaults that depend on the
// dataset are resolved there).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cli/command.h"
#include "structdiff/difformer_runs.h"

namespace structdiff::cli {
namespace {

struct TrainCommand {
  difformer::StudyRequest request;
  std::string json_path;
};

// An option whose absence leaves the request's field empty, for the library's default.
template <typename T>
CLI::Option* add_optional(CLI::App& command, const std::string& name, std::optional<T>& field,
                          const std::string& help) {
  return command.add_option_function<T>(name, [&field](const T& value) { field = value; }, help);
}

CLI::Option* add_optional_flag(CLI::App& command, const std::string& names, std::optional<bool>& field,
                               const std::string& help) {
  return command.add_flag_function(names, [&field](int64_t count) { field = count > 0; }, help);
}

void run_train(const TrainCommand& c, const GlobalOptions& global) {
  difformer::StudyRequest request = c.request;
  request.seed = global.seed;
  const difformer::StudyReport report = difformer::run_study(request);
  if (!c.json_path.empty()) write_json_file(c.json_path, report.record);
}

// The study: dataset, model family and the choices the papers' setups differ in.
void add_study_options(CLI::App& train, difformer::StudyRequest& r) {
  train.add_option("--dataset", r.dataset,
                    "csbm, fashion-mnist, cora, citeseer (committed, data/planetoid) or "
                    "planetoid:DIR")
      ->check([](const std::string& name) -> std::string {
        try {
          difformer::check_dataset_name(name);
          return "";
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      })
      ->capture_default_str();
  train.add_option("--architecture", r.architecture, "difformer, mlp, gcn, gat or transformer")
      ->check(CLI::IsMember({"difformer", "mlp", "gcn", "gat", "transformer"}))
      ->capture_default_str();
  train.add_option("--kernel", r.kernel, "DIFFormer diffusivity: simple (-s) or sigmoid (-a)")
      ->check(CLI::IsMember({"simple", "sigmoid"}))
      ->capture_default_str();
  train.add_option_function<std::string>(
           "--simple-norm",
           [&r](const std::string& name) {
             r.simple_norm = name == "global" ? DiffusivityNorm::global : DiffusivityNorm::per_node;
           },
           "Simple kernel: per-node L2 (paper; the default) or global Frobenius (released code; the "
           "default on cora and citeseer)")
      ->check(CLI::IsMember({"per-node", "global"}));
  add_optional_flag(train, "--normalize-features,!--no-normalize-features", r.normalize_features,
                    "cora, citeseer: divide each node's features by their sum, as the authors do (default: on)");
  add_optional(train, "--split", r.split,
               "per-run (each run its own random split, seeded by the run) or authors (the DIFFormer "
               "authors' one split of seed 123 for every run; needs --test). Default: authors on cora "
               "and citeseer, per-run elsewhere")
      ->check(CLI::IsMember(difformer::split_names()));
  add_optional_flag(train, "--use-graph,!--no-use-graph", r.use_graph,
                    "Add the normalised input graph to the propagation (attention models; default: "
                    "off; on for DIFFormer on cora and citeseer)");
  add_optional_flag(train, "--value-projection,!--no-value-projection", r.value_projection,
                    "Attention models: V = W_V z instead of V = z (default: off; on for fashion-mnist)");
}

// The network and its training; empty optional ones take the dataset's defaults.
void add_network_and_training_options(CLI::App& train, difformer::StudyRequest& r) {
  train.add_flag("--activation", r.network.activation, "ReLU after each layer's LayerNorm");
  add_optional(train, "--layers", r.layers, "Diffusion layers K (default 2; DIFFormer on cora: 8, citeseer: 4)")
      ->check(depth());
  add_optional(train, "--hidden", r.hidden, "Hidden size (default 64; fashion-mnist: 300; DIFFormer-a on citeseer: 32)");
  train.add_option("--heads", r.network.heads, "Attention heads (averaged)")->capture_default_str();
  train.add_option("--tau", r.network.tau, "Step size")->capture_default_str();
  add_optional(train, "--dropout", r.dropout,
               "Dropout (default 0; DIFFormer on cora and citeseer: 0.2; DIFFormer-a on cora: 0)");
  add_optional(train, "--epochs", r.epochs, "Epochs per run (default 200; DIFFormer on cora and citeseer: 500)")
      ->check(work_count(1000000));
  add_optional(train, "--lr", r.learning_rate,
               "Adam learning rate (default 0.01; fashion-mnist: 5e-4; DIFFormer on cora and citeseer: 1e-3)");
  add_optional(train, "--weight-decay", r.weight_decay,
               "Adam weight decay (default 5e-4; fashion-mnist: 0.1; DIFFormer on cora: 0.01 (-s), 0.1 (-a); "
               "citeseer: 1)")
      ->check(non_negative());
  train.add_option("--batch", r.training.batch_size,
                    "Mini-batch size: random node partitions (0: full graph)")
      ->capture_default_str();
  train.add_option("--labels-per-class", r.labels_per_class, "Labelled nodes per class")
      ->capture_default_str();
  train.add_option("--validation", r.validation, "Validation nodes, >= 1 (test: the rest)")
      ->check(positive())
      ->capture_default_str();
  add_optional(train, "--test", r.test, "Test nodes, drawn from the rest (default 0: all of it; cora and citeseer: 1000)");
  train.add_option("--runs", r.runs, "Runs (seeds: --seed, --seed + 1, ...)")
      ->check(work_count(10000))
      ->capture_default_str();
}

// The generated and image datasets' own settings.
void add_dataset_options(CLI::App& train, difformer::StudyRequest& r) {
  train.add_option("--data-dir", r.data_dir, "Fashion-MNIST IDX directory")
      ->check(CLI::ExistingDirectory)
      ->capture_default_str();
  train.add_option("--pool", r.pool, "Fashion-MNIST images (balanced over classes)")
      ->capture_default_str();
  train.add_option("--knn", r.knn, "Fashion-MNIST: k of the kNN graph for graph models")
      ->capture_default_str();
  train.add_option("--nodes", r.csbm.nodes, "CSBM nodes")->capture_default_str();
  train.add_option("--classes", r.csbm.classes, "CSBM classes")->capture_default_str();
  train.add_option("--csbm-features", r.csbm.feature_dim, "CSBM feature dimension")
      ->capture_default_str();
  train.add_option("--degree", r.csbm.average_degree, "CSBM average degree")
      ->capture_default_str();
  train.add_option("--homophily", r.csbm.homophily, "CSBM probability of intra-class edges")
      ->capture_default_str();
  train.add_option("--signal", r.csbm.feature_signal, "CSBM class-mean scale (noise is 1)")
      ->capture_default_str();
}

}  // namespace

void register_difformer(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* difformer = app.add_subcommand(
      "difformer", "DIFFormer and baselines for semi-supervised node classification");
  difformer->require_subcommand(1);

  auto t = std::make_shared<TrainCommand>();
  difformer::StudyRequest& r = t->request;
  CLI::App* train = difformer->add_subcommand(
      "train", "Train and test over several runs (random splits and initialisations)");
  add_study_options(*train, r);
  add_network_and_training_options(*train, r);
  add_dataset_options(*train, r);
  train->add_flag("!--no-progress", r.training.show_progress, "No progress bar");
  train->add_option("--json", t->json_path, "Write the results as JSON")
      ->check(writable_file());
  train->add_option("--out", r.out_path,
                    "Write each run's model (its best-validation weights); with --runs R > 1: "
                    "one file per run, OUT-runK")
      ->check(writable_file());
  train->add_option("--log", r.log_path,
                    "JSONL log of every step and epoch (with --runs R > 1: one file per run, LOG-runK)")
      ->check(writable_file());
  train->add_option("--checkpoint", r.training.checkpoint_path,
                    "Full training state, written every epoch (with --runs R > 1: one file per "
                    "run, CHECKPOINT-runK)")
      ->check(writable_file());
  train->add_flag("--resume", r.training.resume,
                  "Continue each run from its --checkpoint if it exists (same options), bit for bit");
  train->callback([t, &global, &action] { action = [t, &global] { run_train(*t, global); }; });
}

}  // namespace structdiff::cli
