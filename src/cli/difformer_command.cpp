// `structdiff difformer train`: semi-supervised node classification with DIFFormer or a baseline
// (MLP, GCN, GAT, Transformer) on a CSBM graph, Fashion-MNIST, the citation graphs Cora and
// Citeseer, or a Planetoid-style directory.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/command.h"
#include "structdiff/datasets.h"
#include "structdiff/difformer.h"
#include "structdiff/difformer_training.h"
#include "structdiff/runtime.h"
#include "structdiff/train.h"

namespace structdiff::cli {
namespace {

struct TrainCommand {
  std::string dataset = "csbm";
  std::string model = "difformer";
  std::string kernel = "simple";
  std::string simple_norm = "per-node";
  std::string split = "per-run";
  bool normalize_features = false;
  difformer::DIFFormerOptions network;
  difformer::TrainingOptions training;
  int64_t labels_per_class = 20;
  int64_t validation = 500;
  int64_t test = 0;
  int64_t runs = 5;
  std::string data_dir = data::kFashionMnistDirectory;
  int64_t pool = 15000;
  int64_t knn = 10;
  data::CsbmOptions csbm;
  std::string json_path, log_path, out;
  // Options whose default depends on the dataset (resolve_defaults): null until registered.
  CLI::Option *hidden_option = nullptr, *value_projection_option = nullptr,
              *learning_rate_option = nullptr, *weight_decay_option = nullptr,
              *layers_option = nullptr, *dropout_option = nullptr, *epochs_option = nullptr,
              *use_graph_option = nullptr, *test_option = nullptr,
              *simple_norm_option = nullptr, *normalize_features_option = nullptr;
};

// The image setting (--dataset fashion-mnist, the shape of the paper's Table 4): defaults for the
// options not given on the command line, as in the authors' run script for CIFAR/STL features
// (hidden 300, Adam lr 5e-4, weight decay 0.1) with the per-layer value projection of the paper's
// Appendix H.2. The general defaults (lr 0.01, weight decay 5e-4, hidden 64, no value projection)
// stay for CSBM and Planetoid. On raw pixels, lr 0.01 with the value projection makes DIFFormer
// collapse in its first Adam steps and never recover (docs/results/difformer.md).
constexpr int64_t kImageHidden = 300;
constexpr double kImageLearningRate = 5e-4;
constexpr double kImageWeightDecay = 0.1;
constexpr bool kImageValueProjection = true;

// The citation graphs (--dataset cora|citeseer, the paper's Table 2): DIFFormer with the authors'
// released settings (qitianwu/DIFFormer, node classification/run.sh): 500 epochs, Adam lr 0.001,
// one head, residual weight 0.5, the input graph added, the simple kernel's global norm, and per
// dataset and kernel the depth, width, weight decay and dropout below; features row-normalised
// (for every model); 5 runs of 20 labelled nodes per class, 500 validation and 1,000 test nodes,
// each on its own random split (--split authors: the authors' one split, seed 123, for all).
// The baselines keep the general defaults (GCN's classic setting: 2 layers, hidden 64, lr 0.01,
// weight decay 5e-4).
struct CitationSetting {
  const char* dataset;
  const char* kernel;
  int64_t layers, hidden;
  double weight_decay, dropout;
};
constexpr CitationSetting kCitationSettings[] = {
    {"cora", "simple", 8, 64, 0.01, 0.2},
    {"cora", "sigmoid", 8, 64, 0.1, 0.0},
    {"citeseer", "simple", 4, 64, 1.0, 0.2},
    {"citeseer", "sigmoid", 4, 32, 1.0, 0.2},
};
constexpr int64_t kCitationEpochs = 500;
constexpr double kCitationLearningRate = 1e-3;
constexpr int64_t kCitationTestNodes = 1000;
constexpr uint64_t kAuthorsSplitSeed = 123;  // their main.py's torch.manual_seed

bool is_citation_dataset(const std::string& name) {
  for (const std::string& known : data::kCitationDatasets) {
    if (name == known) return true;
  }
  return false;
}

// c's network and training options and test count with the dataset-dependent defaults resolved.
void resolve_defaults(const TrainCommand& c, difformer::DIFFormerOptions& network,
                      difformer::TrainingOptions& training, int64_t& test) {
  auto given = [](const CLI::Option* option) { return option != nullptr && option->count() > 0; };
  if (is_citation_dataset(c.dataset)) {
    if (!given(c.test_option)) test = kCitationTestNodes;
    if (c.model != "difformer") return;
    if (!given(c.simple_norm_option)) network.simple_norm = DiffusivityNorm::global;
    for (const CitationSetting& setting : kCitationSettings) {
      if (c.dataset != setting.dataset || c.kernel != setting.kernel) continue;
      if (!given(c.layers_option)) network.layers = setting.layers;
      if (!given(c.hidden_option)) network.hidden = setting.hidden;
      if (!given(c.weight_decay_option)) training.weight_decay = setting.weight_decay;
      if (!given(c.dropout_option)) network.dropout = setting.dropout;
    }
    if (!given(c.learning_rate_option)) training.learning_rate = kCitationLearningRate;
    if (!given(c.epochs_option)) training.epochs = kCitationEpochs;
    if (!given(c.use_graph_option)) network.use_graph = true;
    return;
  }
  if (c.dataset != "fashion-mnist") return;
  if (!given(c.hidden_option)) network.hidden = kImageHidden;
  if (!given(c.value_projection_option)) network.value_projection = kImageValueProjection;
  if (!given(c.learning_rate_option)) training.learning_rate = kImageLearningRate;
  if (!given(c.weight_decay_option)) training.weight_decay = kImageWeightDecay;
}

constexpr const char* kPlanetoidPrefix = "planetoid:";

bool normalizes_features(const TrainCommand& c) {
  if (!is_citation_dataset(c.dataset)) return false;
  return c.normalize_features_option->count() > 0 ? c.normalize_features : true;
}

difformer::Diffusivity diffusivity_of(const TrainCommand& c) {
  if (c.model == "difformer") {
    return c.kernel == "simple" ? difformer::Diffusivity::simple : difformer::Diffusivity::sigmoid;
  }
  if (c.model == "mlp") return difformer::Diffusivity::identity;
  if (c.model == "gcn") return difformer::Diffusivity::graph;
  if (c.model == "gat") return difformer::Diffusivity::graph_attention;
  return difformer::Diffusivity::full_attention;
}

std::string model_name(const TrainCommand& c, const difformer::DIFFormerOptions& network) {
  std::string name = c.model;
  if (c.model == "difformer") name += c.kernel == "simple" ? "-s" : "-a";
  return network.use_graph ? name + "+graph" : name;
}

// Fashion-MNIST has no graph: a kNN graph over the pixels stands in where the model reads one.
data::NodeDataset load_dataset(const TrainCommand& c, bool needs_graph, uint64_t seed) {
  if (c.dataset == "csbm") return data::make_csbm(c.csbm, seed);
  if (c.dataset == "fashion-mnist") {
    data::NodeDataset dataset = data::load_fashion_mnist(c.data_dir, c.pool, seed);
    if (needs_graph) dataset.graph = data::knn_graph(dataset.features, c.knn);
    return dataset;
  }
  if (c.dataset.rfind(kPlanetoidPrefix, 0) == 0) {
    return data::read_planetoid_directory(c.dataset.substr(std::string(kPlanetoidPrefix).size()));
  }
  if (is_citation_dataset(c.dataset)) {
    data::NodeDataset dataset =
        data::read_planetoid_directory(std::string(data::kPlanetoidDirectory) + "/" + c.dataset);
    dataset.name = c.dataset;
    if (normalizes_features(c)) dataset.features = data::row_normalized(dataset.features);
    return dataset;
  }
  throw std::invalid_argument("--dataset takes csbm, fashion-mnist, cora, citeseer or "
                              "planetoid:DIR, got '" + c.dataset + "'");
}

nlohmann::json dataset_options(const TrainCommand& c) {
  if (c.dataset == "csbm") {
    return {{"nodes", c.csbm.nodes}, {"classes", c.csbm.classes},
            {"features", c.csbm.feature_dim}, {"degree", c.csbm.average_degree},
            {"homophily", c.csbm.homophily}, {"signal", c.csbm.feature_signal}};
  }
  if (c.dataset == "fashion-mnist") return {{"pool", c.pool}, {"knn", c.knn}};
  if (is_citation_dataset(c.dataset)) return {{"normalize_features", normalizes_features(c)}};
  return nlohmann::json::object();
}

// One file per run: PATH itself for a single run, else PATH with "-run2" (etc.) before its
// extension.
std::string run_file_path(const std::string& path, int64_t run, int64_t runs) {
  if (path.empty() || runs == 1) return path;
  const std::filesystem::path file(path);
  return (file.parent_path() /
          (file.stem().string() + "-run" + std::to_string(run + 1) + file.extension().string()))
      .string();
}

void run_train(const TrainCommand& c, const GlobalOptions& global) {
  const uint64_t seed = global.seed;  // the data's, and the first run's
  difformer::DIFFormerOptions network = c.network;
  difformer::TrainingOptions training_options = c.training;
  int64_t test = c.test;
  network.simple_norm =
      c.simple_norm == "global" ? DiffusivityNorm::global : DiffusivityNorm::per_node;
  resolve_defaults(c, network, training_options, test);
  network.diffusivity = diffusivity_of(c);
  if (network.use_graph && (c.model == "mlp" || c.model == "gcn")) {
    throw std::invalid_argument("--use-graph adds a graph branch to attention models, not to " +
                                c.model);
  }
  const data::NodeDataset dataset = load_dataset(c, difformer::needs_graph(network), seed);
  network.input_dim = dataset.features.size(1);
  network.num_classes = dataset.num_classes;
  const std::string name = model_name(c, network);
  const double homophily = data::edge_homophily(dataset.graph, dataset.labels);
  std::printf("%s: %ld nodes, %ld features, %ld classes, %ld undirected edges (homophily %.3f)\n",
              dataset.name.c_str(), static_cast<long>(dataset.num_nodes()),
              static_cast<long>(network.input_dim), static_cast<long>(dataset.num_classes),
              static_cast<long>(dataset.graph.num_entries() / 2), homophily);
  std::fflush(stdout);

  nlohmann::json runs = nlohmann::json::array();
  std::vector<double> test_accuracies;
  for (int64_t run = 0; run < c.runs; ++run) {
    const uint64_t run_seed = seed + static_cast<uint64_t>(run);
    const data::Split split =
        c.split == "authors"
            ? data::class_random_split(dataset.labels, c.labels_per_class, c.validation, test,
                                       kAuthorsSplitSeed)
            : data::semi_supervised_split(dataset.labels, dataset.num_classes,
                                          c.labels_per_class, c.validation, run_seed, test);
    difformer::DIFFormer model = [&] {
      DefaultGeneratorGuard initial_weights(run_seed);
      return difformer::DIFFormer(network);
    }();
    difformer::TrainingOptions training = training_options;
    training.label = name + " run " + std::to_string(run + 1) + "/" + std::to_string(c.runs);
    training.log_path = run_file_path(c.log_path, run, c.runs);
    training.checkpoint_path = run_file_path(training_options.checkpoint_path, run, c.runs);
    const difformer::RunResult r =
        difformer::train_node_classifier(model, dataset, split, training, run_seed);
    std::printf("%s: test %.2f%% at epoch %ld (valid %.2f%%), %.1f s\n", training.label.c_str(),
                100.0 * r.test_accuracy, static_cast<long>(r.best_epoch),
                100.0 * r.best_valid_accuracy, r.seconds);
    std::fflush(stdout);
    test_accuracies.push_back(r.test_accuracy);
    if (!c.out.empty()) {
      difformer::save_model(run_file_path(c.out, run, c.runs), model,
                            {{"dataset", dataset.name},
                             {"architecture", name},
                             {"seed", run_seed},
                             {"best_epoch", r.best_epoch},
                             {"valid_accuracy", r.best_valid_accuracy},
                             {"test_accuracy", r.test_accuracy}});
    }
    runs.push_back({{"seed", run_seed}, {"best_epoch", r.best_epoch},
                    {"valid_accuracy", r.best_valid_accuracy}, {"test_accuracy", r.test_accuracy},
                    {"final_loss", r.final_loss}, {"seconds", r.seconds}});
  }
  const torch::Tensor accuracies = torch::tensor(test_accuracies, torch::kDouble);
  const double mean = accuracies.mean().item<double>();
  // Sample standard deviation over runs; 0 for a single run.
  const double std_dev = c.runs > 1 ? accuracies.std().item<double>() : 0.0;
  std::printf("%s on %s: test accuracy %.2f +- %.2f%% over %ld runs\n", name.c_str(),
              dataset.name.c_str(), 100.0 * mean, 100.0 * std_dev, static_cast<long>(c.runs));
  if (!c.json_path.empty()) {
    write_json_file(c.json_path,
                    {{"dataset", dataset.name},
                     {"model", name},
                     {"nodes", dataset.num_nodes()},
                     {"measured_homophily", homophily},
                     {"config",
                      {{"layers", network.layers}, {"hidden", network.hidden},
                       {"heads", network.heads}, {"tau", network.tau},
                       {"dropout", network.dropout},
                       {"simple_norm", network.simple_norm == DiffusivityNorm::global ? "global" : "per-node"},
                       {"split", c.split},
                       {"value_projection", network.value_projection},
                       {"activation", network.activation},
                       {"epochs", training_options.epochs},
                       {"lr", training_options.learning_rate},
                       {"weight_decay", training_options.weight_decay},
                       {"batch", training_options.batch_size},
                       {"labels_per_class", c.labels_per_class},
                       {"validation", c.validation}, {"test", test},
                       {"use_graph", network.use_graph}, {"seed", seed}}},
                     {"data", dataset_options(c)},
                     {"runs", runs},
                     {"test_accuracy_mean", mean},
                     {"test_accuracy_std", std_dev}});
  }
}

}  // namespace

void register_difformer(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* difformer = app.add_subcommand(
      "difformer", "DIFFormer and baselines for semi-supervised node classification");
  difformer->require_subcommand(1);

  auto t = std::make_shared<TrainCommand>();
  CLI::App* train = difformer->add_subcommand(
      "train", "Train and test over several runs (random splits and initialisations)");
  train->add_option("--dataset", t->dataset,
                    "csbm, fashion-mnist, cora, citeseer (committed, data/planetoid) or "
                    "planetoid:DIR")
      ->capture_default_str();
  train->add_option("--architecture", t->model, "difformer, mlp, gcn, gat or transformer")
      ->check(CLI::IsMember({"difformer", "mlp", "gcn", "gat", "transformer"}))
      ->capture_default_str();
  train->add_option("--kernel", t->kernel, "DIFFormer diffusivity: simple (-s) or sigmoid (-a)")
      ->check(CLI::IsMember({"simple", "sigmoid"}))
      ->capture_default_str();
  t->simple_norm_option =
      train
          ->add_option("--simple-norm", t->simple_norm,
                       "Simple kernel: per-node L2 (paper; the default) or global Frobenius "
                       "(released code; the default on cora and citeseer)")
          ->check(CLI::IsMember({"per-node", "global"}));
  t->normalize_features_option = train->add_flag(
      "--normalize-features,!--no-normalize-features", t->normalize_features,
      "cora, citeseer: divide each node's features by their sum, as the authors do (default: on)");
  train
      ->add_option("--split", t->split,
                   "per-run (each run its own random split, seeded by the run) or authors (the "
                   "DIFFormer authors' one split of seed 123 for every run; needs --test)")
      ->check(CLI::IsMember({"per-run", "authors"}))
      ->capture_default_str();
  t->use_graph_option =
      train->add_flag("--use-graph,!--no-use-graph", t->network.use_graph,
                      "Add the normalised input graph to the propagation (attention models; "
                      "default: off; on for DIFFormer on cora and citeseer)");
  t->value_projection_option =
      train->add_flag("--value-projection,!--no-value-projection", t->network.value_projection,
                      "Attention models: V = W_V z instead of V = z (default: off; on for "
                      "fashion-mnist)");
  train->add_flag("--activation", t->network.activation, "ReLU after each layer's LayerNorm");
  t->layers_option = train->add_option("--layers", t->network.layers,
                                       "Diffusion layers K (DIFFormer on cora: 8, citeseer: 4)")
                         ->capture_default_str();
  t->hidden_option =
      train->add_option("--hidden", t->network.hidden,
                        "Hidden size (fashion-mnist: 300; DIFFormer-a on citeseer: 32)")
          ->capture_default_str();
  train->add_option("--heads", t->network.heads, "Attention heads (averaged)")
      ->capture_default_str();
  train->add_option("--tau", t->network.tau, "Step size")->capture_default_str();
  t->dropout_option =
      train->add_option("--dropout", t->network.dropout,
                        "Dropout (DIFFormer on cora and citeseer: 0.2; DIFFormer-a on cora: 0)")
          ->capture_default_str();
  t->epochs_option = train->add_option("--epochs", t->training.epochs,
                                       "Epochs per run (DIFFormer on cora and citeseer: 500)")
                         ->check(positive())
                         ->capture_default_str();
  t->learning_rate_option =
      train->add_option("--lr", t->training.learning_rate,
                        "Adam learning rate (fashion-mnist: 5e-4; DIFFormer on cora and "
                        "citeseer: 1e-3)")
          ->capture_default_str();
  t->weight_decay_option =
      train->add_option("--weight-decay", t->training.weight_decay,
                        "Adam weight decay (fashion-mnist: 0.1; DIFFormer on cora: 0.01 (-s), "
                        "0.1 (-a); citeseer: 1)")
          ->check(non_negative())
          ->capture_default_str();
  train->add_option("--batch", t->training.batch_size,
                    "Mini-batch size: random node partitions (0: full graph)")
      ->capture_default_str();
  train->add_option("--labels-per-class", t->labels_per_class, "Labelled nodes per class")
      ->capture_default_str();
  train->add_option("--validation", t->validation, "Validation nodes, >= 1 (test: the rest)")
      ->check(positive())
      ->capture_default_str();
  t->test_option = train->add_option("--test", t->test,
                                     "Test nodes, drawn from the rest (0: all of it; cora and "
                                     "citeseer: 1000)")
                       ->capture_default_str();
  train->add_option("--runs", t->runs, "Runs (seeds: --seed, --seed + 1, ...)")
      ->check(positive())
      ->capture_default_str();
  train->add_option("--data-dir", t->data_dir, "Fashion-MNIST IDX directory")
      ->capture_default_str();
  train->add_option("--pool", t->pool, "Fashion-MNIST images (balanced over classes)")
      ->capture_default_str();
  train->add_option("--knn", t->knn, "Fashion-MNIST: k of the kNN graph for graph models")
      ->capture_default_str();
  train->add_option("--nodes", t->csbm.nodes, "CSBM nodes")->capture_default_str();
  train->add_option("--classes", t->csbm.classes, "CSBM classes")->capture_default_str();
  train->add_option("--csbm-features", t->csbm.feature_dim, "CSBM feature dimension")
      ->capture_default_str();
  train->add_option("--degree", t->csbm.average_degree, "CSBM average degree")
      ->capture_default_str();
  train->add_option("--homophily", t->csbm.homophily, "CSBM probability of intra-class edges")
      ->capture_default_str();
  train->add_option("--signal", t->csbm.feature_signal, "CSBM class-mean scale (noise is 1)")
      ->capture_default_str();
  train->add_flag("!--no-progress", t->training.show_progress, "No progress bar");
  train->add_option("--json", t->json_path, "Write the results as JSON")
      ->check(writable_file());
  train->add_option("--out", t->out,
                    "Write each run's model (its best-validation weights); with --runs R > 1: "
                    "one file per run, OUT-runK")
      ->check(writable_file());
  train->add_option("--log", t->log_path,
                    "JSONL log of every step and epoch (with --runs R > 1: one file per run, LOG-runK)")
      ->check(writable_file());
  train->add_option("--checkpoint", t->training.checkpoint_path,
                    "Full training state, written every epoch (with --runs R > 1: one file per "
                    "run, CHECKPOINT-runK)")
      ->check(writable_file());
  train->add_flag("--resume", t->training.resume,
                  "Continue each run from its --checkpoint if it exists (same options), bit for bit");
  train->callback([t, &global, &action] { action = [t, &global] { run_train(*t, global); }; });
}

}  // namespace structdiff::cli
