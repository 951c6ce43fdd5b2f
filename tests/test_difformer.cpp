// DIFFormer and its baselines: Theorem 1's energy descent, the GCN normalisation, the GAT path
// through the sparse kernel, mini-batch training against full-batch training.
#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/datasets.h"
#include "structdiff/difformer.h"
#include "structdiff/difformer_runs.h"
#include "structdiff/difformer_training.h"
#include "structdiff/checkpoint.h"
#include "structdiff/model_file.h"
#include "support/data.h"
#include "support/expect_throw.h"
#include "support/gradcheck.h"
#include "support/temporary_files.h"

namespace structdiff::difformer {
namespace {

// A CSBM graph of `nodes` nodes, 8 features and `classes` classes, and a split with 5 labelled
// nodes per class and 15 validation nodes.
struct SmallGraph {
  data::NodeDataset dataset;
  data::Split split;
};
SmallGraph small_csbm(int64_t nodes, int64_t classes, double degree = 8.0) {
  data::CsbmOptions csbm;
  csbm.nodes = nodes;
  csbm.classes = classes;
  csbm.feature_dim = 8;
  csbm.average_degree = degree;
  data::NodeDataset dataset = data::make_csbm(csbm, 5);
  data::Split split = data::semi_supervised_split(dataset.labels, classes, 5, 15, 6);
  return {std::move(dataset), std::move(split)};
}

// A network for that graph.
DIFFormerOptions network_for(const data::NodeDataset& dataset) {
  DIFFormerOptions network;
  network.input_dim = dataset.features.size(1);
  network.num_classes = dataset.num_classes;
  network.hidden = 16;
  return network;
}

torch::Tensor unit_rows(int64_t n, int64_t d) {
  const torch::Tensor z = torch::randn({n, d}, torch::kDouble);
  return z / z.norm(2, {1}, /*keepdim=*/true);
}

// Q = K = z: the conv computes Eq. 7 on the states themselves, as Theorem 1 assumes.
DIFFormerConv identity_query_key_conv(int64_t dim, double tau) {
  ConvOptions options;
  options.dim = dim;
  options.diffusivity = Diffusivity::simple;
  options.tau = tau;
  DIFFormerConv conv(options);
  conv->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  for (auto& parameter : conv->named_parameters()) {
    if (parameter.key().find("weight") != std::string::npos) {
      parameter.value().copy_(torch::eye(dim, torch::kDouble));
    } else {
      parameter.value().zero_();
    }
  }
  return conv;
}

TEST(DIFFormerConv, SimpleStepIsEq7WithTheClosedFormDiffusivity) {
  torch::manual_seed(0);
  const torch::Tensor z = unit_rows(12, 4);
  const double tau = 0.3;
  DIFFormerConv conv = identity_query_key_conv(4, tau);
  const torch::Tensor weights = 1.0 + z.matmul(z.t());  // omega_ij = 1 + z_i.z_j
  const torch::Tensor s = weights / weights.sum(1, /*keepdim=*/true);
  const torch::Tensor expected = (1.0 - tau) * z + tau * s.matmul(z);
  EXPECT_TRUE(torch::allclose(conv->forward(z), expected, 1e-10, 1e-12));
}

// Theorem 1: E(Z^(k+1), k) <= E(Z^(k), k) = lambda sum delta(||z_i - z_j||^2) for suitable tau.
TEST(DIFFormerEnergy, SimpleDiffusionStepDoesNotIncreaseEnergy) {
  torch::manual_seed(1);
  for (int trial = 0; trial < 3; ++trial) {
    const torch::Tensor z = unit_rows(40, 6);
    for (double tau : {0.05, 0.25, 0.5}) {
      for (double lambda : {0.1, 1.0}) {
        DIFFormerConv conv = identity_query_key_conv(6, tau);
        const torch::Tensor next = conv->forward(z).detach();
        const double before = simple_diffusivity_energy(z, z, lambda);
        const double after = simple_diffusivity_energy(next, z, lambda);
        EXPECT_LT(after, before) << "tau " << tau << " lambda " << lambda;
        // The same step against the diffusion raises the energy: the check has teeth.
        const torch::Tensor against = (2.0 * z - next).detach();
        EXPECT_GT(simple_diffusivity_energy(against, z, lambda), before);
      }
    }
  }
}

// "There exists tau": with a weak pull between instances (small lambda) only a short step pays
// for its distance from Z^(k).
TEST(DIFFormerEnergy, SuitableStepSizeDependsOnLambda) {
  torch::manual_seed(2);
  const torch::Tensor z = unit_rows(40, 6);
  const double lambda = 1e-3;
  const double before = simple_diffusivity_energy(z, z, lambda);
  auto energy_after_step = [&](double tau) {
    return simple_diffusivity_energy(identity_query_key_conv(6, tau)->forward(z).detach(), z,
                                     lambda);
  };
  EXPECT_LT(energy_after_step(0.02), before);
  EXPECT_GT(energy_after_step(0.9), before);
}

TEST(DIFFormerEnergy, EnergyOfIdenticalStatesIsZero) {
  const torch::Tensor z = torch::ones({5, 3}, torch::kDouble) / std::sqrt(3.0);
  EXPECT_NEAR(simple_diffusivity_energy(z, z, 1.0), 0.0, 1e-12);
}

// Path 0-1-2 and an isolated node 3: degrees of A + I are 2, 3, 2, 1.
TEST(GraphInput, SymmetricNormalisationByHand) {
  const AttentionPattern path = patterns::from_edges(4, {{0, 1}, {1, 2}}, {true, false});
  const GraphInput graph(path);
  const double a = 1.0 / std::sqrt(6.0);
  const torch::Tensor expected = torch::tensor({{0.5, a, 0.0, 0.0},
                                                {a, 1.0 / 3.0, a, 0.0},
                                                {0.0, a, 0.5, 0.0},
                                                {0.0, 0.0, 0.0, 1.0}},
                                               torch::kDouble);
  EXPECT_TRUE(torch::allclose(graph.normalized_adjacency().to_dense().to(torch::kDouble), expected,
                              1e-6, 1e-7));
  const torch::Tensor x = torch::randn({4, 2}, torch::kDouble);
  EXPECT_TRUE(torch::allclose(graph.propagate(x), expected.matmul(x), 1e-6, 1e-7));
}

TEST(GraphInput, RejectsAnAsymmetricAdjacency) {
  EXPECT_THROW_WITH(GraphInput(patterns::from_edges(3, {{0, 1}})), std::invalid_argument,
                    "symmetric");
}

TEST(DIFFormerConv, GcnLayerIsNormalisedAdjacencyTimesLinearMap) {
  torch::manual_seed(2);
  ConvOptions options;
  options.dim = 3;
  options.diffusivity = Diffusivity::graph;
  options.tau = 1.0;
  DIFFormerConv conv(options);
  const GraphInput graph(patterns::from_edges(5, {{0, 1}, {1, 2}, {3, 4}}, {true, false}));
  const torch::Tensor z = torch::randn({5, 3});
  auto parameters = conv->named_parameters();
  const torch::Tensor mapped = torch::nn::functional::linear(z, parameters["value.weight"],
                                                             parameters["value.bias"]);
  const torch::Tensor expected = graph.normalized_adjacency().to_dense().matmul(mapped);
  EXPECT_TRUE(torch::allclose(conv->forward(z, &graph), expected, 1e-5, 1e-6));
}

TEST(DIFFormerConv, GraphDiffusivitiesNeedTheGraph) {
  ConvOptions options;
  options.dim = 4;
  options.diffusivity = Diffusivity::graph_attention;
  DIFFormerConv conv(options);
  EXPECT_THROW_WITH(conv->forward(torch::randn({3, 4})), std::invalid_argument,
                    "needs the observed graph");
}

// The GAT-like layer through the fused sparse kernel equals dense attention restricted to A + I,
// forward and gradients, with two heads and a value projection.
TEST(DIFFormerConv, GraphAttentionViaSparseKernelEqualsDenseWithPattern) {
  torch::manual_seed(3);
  const int64_t n = 9, dim = 4, heads = 2;
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (int64_t i = 0; i < n; ++i) {
    edges.emplace_back(i, (3 * i + 1) % n);
    edges.emplace_back(i, (i + 2) % n);
  }
  patterns::EdgeOptions symmetric;
  symmetric.symmetrize = true;
  const GraphInput graph(patterns::from_edges(n, edges, symmetric));
  ConvOptions options;
  options.dim = dim;
  options.heads = heads;
  options.diffusivity = Diffusivity::graph_attention;
  options.value_projection = true;
  DIFFormerConv conv(options);
  conv->to(torch::kDouble);
  auto parameters = conv->named_parameters();
  auto split_heads = [&](const torch::Tensor& t) {
    return t.view({n, heads, dim}).permute({1, 0, 2}).unsqueeze(0);
  };
  auto project = [&](const torch::Tensor& z, const std::string& name) {
    return split_heads(torch::nn::functional::linear(z, parameters[name + ".weight"],
                                                     parameters[name + ".bias"]));
  };
  testing::expect_same_function(
      [&](const std::vector<torch::Tensor>& in) { return conv->propagate(in[0], &graph); },
      [&](const std::vector<torch::Tensor>& in) {
        const torch::Tensor& z = in[0];
        return dense_attention(project(z, "query"), project(z, "key"), project(z, "value"),
                               Scaling::inverse_sqrt_dim, &graph.with_self_loops())
            .squeeze(0)
            .mean(0);
      },
      {torch::randn({n, dim}, torch::kDouble)});
}

// One chunk holding every node (in a random order, with its induced subgraph) is the full graph.
TEST(NodeTraining, MiniBatchOfTheWholeGraphEqualsFullBatch) {
  const SmallGraph graph = small_csbm(60, 3, 4.0);
  const data::NodeDataset& dataset = graph.dataset;
  const data::Split& split = graph.split;
  for (Diffusivity diffusivity : {Diffusivity::simple, Diffusivity::graph_attention}) {
    DIFFormerOptions network = network_for(dataset);
    network.layers = 2;
    network.diffusivity = diffusivity;
    network.use_graph = diffusivity == Diffusivity::simple;
    TrainingOptions training;
    training.epochs = 4;
    training.show_progress = false;
    std::vector<std::vector<torch::Tensor>> weights;
    std::vector<RunResult> results;
    for (int64_t batch : {int64_t{0}, dataset.num_nodes()}) {
      torch::manual_seed(11);
      DIFFormer model(network);
      training.batch_size = batch;
      results.push_back(train_node_classifier(model, dataset, split, training, 12));
      weights.push_back(model->parameters());
    }
    EXPECT_EQ(results[0].best_epoch, results[1].best_epoch);
    EXPECT_NEAR(results[0].final_loss, results[1].final_loss, 1e-5);
    for (size_t i = 0; i < weights[0].size(); ++i) {
      EXPECT_TRUE(torch::allclose(weights[0][i], weights[1][i], 1e-4, 1e-5))
          << diffusivity_name(diffusivity) << " parameter " << i;
    }
  }
}

// Mini-batch training with dropout, stopped in the middle of an epoch and resumed in a fresh
// model: the weights, the chosen epoch and its accuracies equal those of an uninterrupted run.
TEST(NodeTraining, HalfThenResumeEqualsStraightRunBitForBit) {
  const SmallGraph graph = small_csbm(60, 3);
  const data::NodeDataset& dataset = graph.dataset;
  const data::Split& split = graph.split;
  DIFFormerOptions network = network_for(dataset);
  network.dropout = 0.3;
  TrainingOptions training;
  training.epochs = 4;
  training.batch_size = 25;  // 3 steps an epoch
  training.show_progress = false;
  auto run = [&](const TrainingOptions& options) {
    torch::manual_seed(11);
    DIFFormer model(network);
    const RunResult result = train_node_classifier(model, dataset, split, options, 12);
    return std::make_pair(result, model->parameters());
  };
  const auto [straight, straight_weights] = run(training);

  TemporaryDirectory directory;
  training.checkpoint_path = directory.file("difformer.ckpt");
  training.stop_after_steps = 7;  // in the third epoch
  run(training);
  training.stop_after_steps = 0;
  training.resume = true;
  const auto [resumed, resumed_weights] = run(training);
  EXPECT_EQ(straight.best_epoch, resumed.best_epoch);
  EXPECT_EQ(straight.best_valid_accuracy, resumed.best_valid_accuracy);
  EXPECT_EQ(straight.test_accuracy, resumed.test_accuracy);
  ASSERT_EQ(straight_weights.size(), resumed_weights.size());
  for (size_t i = 0; i < straight_weights.size(); ++i) {
    EXPECT_TRUE(torch::equal(straight_weights[i], resumed_weights[i])) << "parameter " << i;
  }
}

// Dropout masks come from the loop's generator: the default generator's state does not matter.
TEST(NodeTraining, DropoutDrawsNothingFromTheDefaultGenerator) {
  const SmallGraph graph = small_csbm(60, 3);
  DIFFormerOptions network = network_for(graph.dataset);
  network.dropout = 0.5;
  TrainingOptions training;
  training.epochs = 2;
  training.show_progress = false;
  auto run = [&](uint64_t default_seed) {
    torch::manual_seed(11);
    DIFFormer model(network);
    torch::manual_seed(default_seed);
    train_node_classifier(model, graph.dataset, graph.split, training, 12);
    return model->parameters();
  };
  const auto first = run(1), second = run(2);
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_TRUE(torch::equal(first[i], second[i])) << "parameter " << i;
  }
}

TEST(DIFFormerModelFile, RoundTripKeepsOptionsWeightsAndTheCallersGenerator) {
  DIFFormerOptions options;
  options.input_dim = 5;
  options.num_classes = 3;
  options.hidden = 12;
  options.layers = 3;
  options.heads = 2;
  options.diffusivity = Diffusivity::sigmoid;
  options.simple_norm = DiffusivityNorm::global;
  options.value_projection = true;
  options.activation = true;
  options.tau = 0.25;
  options.dropout = 0.1;
  torch::manual_seed(2);
  DIFFormer model(options);
  model->eval();
  TemporaryDirectory directory;
  const std::string path = directory.file("difformer.pt");
  save_model(path, model, {{"dataset", "csbm"}, {"test_accuracy", 0.5}});

  torch::manual_seed(5);
  const torch::Tensor expected = torch::rand({3});
  torch::manual_seed(5);
  DIFFormer loaded = load_model(path);
  EXPECT_TRUE(torch::rand({3}).equal(expected));  // loading drew nothing from it
  EXPECT_FALSE(loaded->is_training());
  EXPECT_EQ(nlohmann::json(loaded->options()), nlohmann::json(options));
  const torch::Tensor features = torch::randn({7, 5});
  EXPECT_TRUE(loaded->forward(features, nullptr).equal(model->forward(features, nullptr)));
  EXPECT_EQ(train::model_info(path)["kind"], "difformer");
  EXPECT_EQ(train::read_checkpoint_metadata(path)["test_accuracy"], 0.5);
  EXPECT_THROW_WITH(load_model(directory.file("missing.pt")), std::runtime_error, "missing.pt");
}

// A width no machine holds (a hostile model file's, say) is refused before any weight exists.
TEST(DIFFormerModelFile, AWidthBeyondTheMachineIsRefusedBeforeAllocating) {
  DIFFormerOptions options;
  options.input_dim = 32;
  options.num_classes = 5;
  options.hidden = 100000000;
  EXPECT_THROW_WITH(DIFFormer{options}, std::invalid_argument,
                    "a DIFFormer of hidden size 100000000, 2 layers, heads 1 needs 240000014.8 GB");
}

TEST(DIFFormerModelFile, UnknownNamesInTheConfigurationAreNamed) {
  nlohmann::json j = DIFFormerOptions{};
  j["diffusivity"] = "softmax";
  EXPECT_THROW_WITH(j.get<DIFFormerOptions>(), std::invalid_argument, "unknown diffusivity 'softmax'");
  j = DIFFormerOptions{};
  j["simple_norm"] = "l1";
  EXPECT_THROW_WITH(j.get<DIFFormerOptions>(), std::invalid_argument, "unknown simple_norm 'l1'");
}

TEST(NodeTraining, NonFiniteFeaturesAreRefusedBeforeTraining) {
  const SmallGraph graph = small_csbm(60, 3);
  const data::NodeDataset& dataset = graph.dataset;
  const data::Split& split = graph.split;
  DIFFormer model(network_for(dataset));
  TrainingOptions training;
  training.show_progress = false;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    dataset.features[4][2] = bad;
    EXPECT_THROW_WITH(train_node_classifier(model, dataset, split, training, 1), std::invalid_argument,
                      "csbm: the features hold NaN or infinite values");
  }
}

TEST(NodeTraining, DIFFormerLearnsAnEasyCsbm) {
  data::CsbmOptions csbm;
  csbm.nodes = 200;
  csbm.classes = 2;
  csbm.feature_dim = 8;
  csbm.feature_signal = 3.0;
  const data::NodeDataset dataset = data::make_csbm(csbm, 1);
  const data::Split split = data::semi_supervised_split(dataset.labels, 2, 10, 50, 2);
  torch::manual_seed(3);
  DIFFormer model(network_for(dataset));
  TrainingOptions training;
  training.epochs = 30;
  training.show_progress = false;
  const RunResult result = train_node_classifier(model, dataset, split, training, 4);
  EXPECT_GT(result.test_accuracy, 0.8);
}

}  // namespace
// The study resolves the defaults the dataset decides, and what the request names wins: Cora with
// the sigmoid kernel gets the authors' released setting and split, except the epochs given here.
TEST(DIFFormerStudy, CitationDefaultsAndWhatTheRequestNames) {
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(STRUCTDIFF_SOURCE_DIR);  // data/planetoid, as a user runs it
  StudyRequest request;
  request.dataset = "cora";
  request.kernel = "sigmoid";
  request.runs = 1;
  request.epochs = 1;
  request.hidden = 16;
  request.training.show_progress = false;
  const StudyReport report = run_study(request);
  std::filesystem::current_path(before);
  const nlohmann::json& config = report.record.at("config");
  EXPECT_EQ(report.record.at("model"), "difformer-a+graph");
  EXPECT_EQ(config.at("layers"), 8);
  EXPECT_EQ(config.at("hidden"), 16);
  EXPECT_EQ(config.at("epochs"), 1);
  EXPECT_DOUBLE_EQ(config.at("weight_decay").get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(config.at("lr").get<double>(), 1e-3);
  EXPECT_EQ(config.at("simple_norm"), "global");
  EXPECT_EQ(config.at("test"), 1000);
  EXPECT_EQ(config.at("split"), "authors");
  EXPECT_EQ(report.record.at("data").at("normalize_features"), true);
  EXPECT_EQ(report.record.at("runs").size(), 1u);

  StudyRequest graph_on_gcn;
  graph_on_gcn.architecture = "gcn";
  graph_on_gcn.use_graph = true;
  EXPECT_THROW_WITH(run_study(graph_on_gcn), std::invalid_argument,
                    "--use-graph adds a graph branch to attention models, not to gcn");

  StudyRequest unknown_split;
  unknown_split.split = "random";
  EXPECT_THROW_WITH(run_study(unknown_split), std::invalid_argument,
                    "unknown split 'random' (choose per-run or authors)");

  StudyRequest unknown;
  for (const std::string name : {"pubmed", "planetoid:", "Cora"}) {
    unknown.dataset = name;
    EXPECT_THROW_WITH(run_study(unknown), std::invalid_argument, "unknown dataset '" + name + "'");
  }
  for (const std::string name : {"csbm", "fashion-mnist", "cora", "citeseer", "planetoid:/data"}) {
    EXPECT_NO_THROW(check_dataset_name(name)) << name;
  }
}

// The defaults the dataset decides for what the request leaves empty: CSBM the general ones,
// Fashion-MNIST the authors' image setting, and what the request names wins; each of several runs
// writes its own model file, which records the dataset.
TEST(DIFFormerStudy, CsbmAndFashionMnistDefaultsAndOneModelFilePerRun) {
  const TemporaryDirectory directory;
  StudyRequest request;
  request.architecture = "mlp";
  request.runs = 2;
  request.epochs = 1;
  request.labels_per_class = 2;
  request.validation = 20;
  request.csbm.nodes = 100;
  request.csbm.classes = 3;
  request.training.show_progress = false;
  request.out_path = directory.file("node-model.pt");
  const nlohmann::json record = run_study(request).record;
  // Training allocates activations and gradients beyond the data: the peak is above zero.
  for (const nlohmann::json& run : record.at("runs")) EXPECT_GT(run.at("peak_tensor_mb").get<double>(), 0.0);
  nlohmann::json config = record.at("config");
  EXPECT_EQ(config.at("hidden"), 64);
  EXPECT_DOUBLE_EQ(config.at("lr").get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(config.at("weight_decay").get<double>(), 5e-4);
  EXPECT_EQ(config.at("value_projection"), false);
  EXPECT_EQ(config.at("split"), "per-run");
  for (const char* run : {"node-model-run1.pt", "node-model-run2.pt"}) {
    const nlohmann::json info = train::model_info(directory.file(run));
    EXPECT_EQ(info.at("kind"), "difformer");
    EXPECT_EQ(info.at("recorded").at("dataset"), "csbm");
  }

  SKIP_WITHOUT_DATA(std::string(data::kFashionMnistDirectory) + "/train-labels-idx1-ubyte.gz");
  request.dataset = "fashion-mnist";
  request.pool = 100;
  request.runs = 1;
  request.out_path.clear();
  config = run_study(request).record.at("config");
  EXPECT_EQ(config.at("hidden"), 300);
  EXPECT_DOUBLE_EQ(config.at("lr").get<double>(), 5e-4);
  EXPECT_DOUBLE_EQ(config.at("weight_decay").get<double>(), 0.1);
  EXPECT_EQ(config.at("value_projection"), true);
  request.hidden = 32;
  request.learning_rate = 0.01;
  request.weight_decay = 0;
  request.value_projection = false;
  config = run_study(request).record.at("config");
  EXPECT_EQ(config.at("hidden"), 32);
  EXPECT_DOUBLE_EQ(config.at("lr").get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(config.at("weight_decay").get<double>(), 0.0);
  EXPECT_EQ(config.at("value_projection"), false);
}

}  // namespace structdiff::difformer
