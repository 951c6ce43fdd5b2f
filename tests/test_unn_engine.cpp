// The undirected-network engine: exact block minimisers for every activation, closed-form messages
// equal to autograd's, the conv adjoint, energy that coordinate descent never raises, the first
// attention sweep equal to softmax attention, schedules, dropout, unrolled gradients, bad input.
#include <cmath>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "structdiff/dependency_tree.h"
#include "structdiff/unn.h"
#include "support/expect_throw.h"

namespace unn = structdiff::unn;
using unn::Activation;
using unn::Schedule;

namespace {

at::Generator seeded(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

torch::Tensor per_example_dot(const torch::Tensor& a, const torch::Tensor& b) {
  return (a * b).reshape({a.size(0), -1}).sum(1);
}

// ModuleHolder forwards its arguments, so braced lists need their types spelled out.
unn::ContractionFactor contraction(const std::string& equation, std::vector<std::string> names,
                                   std::vector<int64_t> weight_shape, at::Generator& generator) {
  return unn::ContractionFactor(equation, std::move(names), std::move(weight_shape), generator);
}

// The block energy E(x) = Psi(x) - <z, x>, float64, per example.
torch::Tensor block_energy(const unn::Variable& v, const torch::Tensor& x, const torch::Tensor& z) {
  return unn::regulariser(v, x) - per_example_dot(z, x);
}

// A chain X - H1 - H2 - y of conv and linear factors with tanh / softmax variables (float64).
unn::Graph conv_chain(at::Generator& generator) {
  unn::Graph graph;
  graph->add_variable({"X", {1, 10, 10}, Activation::tanh, 1.0, {}}, generator);
  graph->add_variable({"H1", {3, 4, 4}, Activation::tanh, 1.0, {3, 1, 1}}, generator, 9);
  graph->add_variable({"H2", {4, 1, 1}, Activation::relu, 1.0, {4, 1, 1}}, generator, 48);
  graph->add_variable({"y", {5}, Activation::softmax, 0.7, {5}}, generator, 4);
  graph->add_factor(unn::Conv2dFactor("X", "H1", 1, 3, 4, 2, generator));
  graph->add_factor(unn::Conv2dFactor("H1", "H2", 3, 4, 4, 1, generator));
  graph->add_factor(unn::LinearFactor("H2", "y", 4, 5, generator));
  graph->to(torch::kDouble);
  return graph;
}

// One undirected attention layer over X (n, d): Q, K, V from X + P, scores S, output H.
unn::Graph attention_graph(int64_t n, int64_t d, at::Generator& generator,
                           torch::Tensor offset = {}) {
  unn::Graph graph;
  graph->add_variable({"X", {n, d}, Activation::identity, 1.0, {}}, generator);
  for (const char* name : {"Q", "K", "V"}) {
    graph->add_variable({name, {n, d}, Activation::identity, 1.0, {}}, generator);
  }
  graph->add_variable({"S", {n, n}, Activation::softmax, std::sqrt(double(d)), {}}, generator);
  graph->add_variable({"H", {n, d}, Activation::identity, 1.0, {}}, generator);
  for (const char* name : {"Q", "K", "V"}) {
    graph->add_factor(contraction("ij,bnj,bni", {"X", name}, {d, d}, generator));
  }
  graph->add_factor(unn::AttentionScoreFactor("S", "Q", "K"));
  graph->add_factor(unn::AttentionValueFactor("H", "S", "V"));
  graph->to(torch::kDouble);
  return graph;
}

unn::Network single(unn::Graph graph) {
  return unn::Network([&](int64_t) { return graph; }, 1);
}

// Every step of a recorded energy trace lowers or keeps the energy (relative tolerance).
void expect_non_increasing(const std::vector<double>& energy) {
  ASSERT_GE(energy.size(), 2u);
  for (size_t i = 1; i < energy.size(); ++i) {
    if (std::isinf(energy[i - 1])) continue;
    EXPECT_LE(energy[i], energy[i - 1] + 1e-9 * std::abs(energy[i - 1])) << "update " << i;
  }
}

}  // namespace

TEST(UnnActivation, EachUpdateIsTheExactBlockMinimiser) {
  torch::manual_seed(0);
  const torch::Tensor z = torch::randn({3, 6}, torch::kDouble) * 2;
  // E at the update equals -Psi*(z) (Fenchel-Young), and no nearby point of the domain is lower.
  const std::vector<std::pair<unn::Variable, torch::Tensor>> cases = {
      {{"a", {6}, Activation::identity}, -0.5 * (z * z).sum(1)},
      {{"a", {6}, Activation::relu}, -0.5 * torch::relu(z).square().sum(1)},
      {{"a", {6}, Activation::sigmoid}, -torch::softplus(z).sum(1)},
      {{"a", {6}, Activation::tanh}, -torch::log(2 * torch::cosh(z)).sum(1)},
      {{"a", {6}, Activation::softmax, 0.5}, -0.5 * torch::logsumexp(z / 0.5, 1)},
  };
  for (const auto& [variable, minimum] : cases) {
    const torch::Tensor x = unn::activate(variable, z);
    const torch::Tensor at_update = block_energy(variable, x, z);
    EXPECT_TRUE(torch::allclose(at_update, minimum, 1e-9, 1e-9))
        << unn::activation_name(variable.activation);
    for (int trial = 0; trial < 20; ++trial) {
      torch::Tensor moved = x + 1e-3 * torch::randn_like(x);
      if (variable.activation == Activation::softmax) {
        moved = moved.clamp_min(0);
        moved = moved / moved.sum(1, true);
      }
      if (variable.activation == Activation::relu) moved = moved.clamp_min(0);
      if (variable.activation == Activation::sigmoid) moved = moved.clamp(0, 1);
      if (variable.activation == Activation::tanh) moved = moved.clamp(-1, 1);
      EXPECT_TRUE((block_energy(variable, moved, z) >= at_update - 1e-12).all().item<bool>())
          << unn::activation_name(variable.activation);
    }
  }
}

TEST(UnnActivation, RegulariserIsInfiniteOutsideTheDomain) {
  const unn::Variable probability{"y", {3}, Activation::softmax};
  EXPECT_TRUE(std::isinf(unn::regulariser(probability, torch::zeros({1, 3})).item<double>()));
  EXPECT_TRUE(std::isinf(
      unn::regulariser({"h", {2}, Activation::tanh}, torch::full({1, 2}, 1.5)).item<double>()));
  EXPECT_TRUE(std::isinf(
      unn::regulariser({"h", {2}, Activation::relu}, torch::full({1, 2}, -0.1)).item<double>()));
  // With a support, a row with nothing allowed is zero and costs nothing.
  const torch::Tensor support = torch::tensor({true, false, true}).view({1, 3});
  const torch::Tensor x = unn::activate(probability, torch::randn({1, 3}), support);
  EXPECT_EQ(x[0][1].item<double>(), 0.0);
  EXPECT_NEAR(x.sum().item<double>(), 1.0, 1e-6);
  EXPECT_TRUE(std::isfinite(unn::regulariser(probability, x, support).item<double>()));
  const torch::Tensor none = torch::zeros({1, 3}, torch::kBool);
  EXPECT_TRUE(unn::activate(probability, torch::randn({1, 3}), none).eq(0).all().item<bool>());
}

TEST(UnnFactors, ClosedFormMessagesEqualAutograd) {
  at::Generator generator = seeded(1);
  const int64_t n = 4, d = 3;
  std::vector<std::pair<unn::FactorPtr, std::vector<std::vector<int64_t>>>> cases = {
      {unn::LinearFactor("a", "b", 6, 5, generator, torch::randn({2, 3}, torch::kDouble)).ptr(),
       {{2, 3}, {5}}},
      {unn::Conv2dFactor("a", "b", 2, 3, 3, 2, generator).ptr(), {{2, 9, 8}, {3, 4, 3}}},
      {contraction("ijk,bi,bj,bk->b", {"a", "b", "c"}, {3, 4, 2}, generator).ptr(),
       {{3}, {4}, {2}}},
      {unn::AttentionScoreFactor("s", "q", "k").ptr(), {{n, n}, {n, d}, {n, d}}},
      {unn::AttentionValueFactor("h", "s", "v").ptr(), {{n, d}, {n, n}, {n, d}}},
      {unn::BiaffineFactor("y", "h", "m", d, generator).ptr(), {{n + 1, n}, {n + 1, d}, {n, d}}},
  };
  for (auto& [factor, shapes] : cases) {
    factor->to(torch::kDouble);
    factor->check_shapes(shapes);
    std::vector<torch::Tensor> values;
    for (auto shape : shapes) {
      shape.insert(shape.begin(), 2);
      values.push_back(torch::randn(shape, torch::kDouble));
    }
    for (size_t target = 0; target < values.size(); ++target) {
      const torch::Tensor closed = factor->message(target, values);
      const torch::Tensor automatic = factor->FactorImpl::message(target, values);
      EXPECT_TRUE(torch::allclose(closed, automatic, 1e-10, 1e-10))
          << factor->kind() << " message to " << target;
      // The energy is affine in each variable: E(x) - E(x with x_t = 0) = -<x_t, message_t>.
      std::vector<torch::Tensor> without = values;
      without[target] = torch::zeros_like(values[target]);
      EXPECT_TRUE(torch::allclose(factor->energy(values) - factor->energy(without),
                                  -per_example_dot(values[target], closed), 1e-10, 1e-10))
          << factor->kind();
    }
  }
}

TEST(UnnFactors, ConvolutionMessageIsTheAdjoint) {
  at::Generator generator = seeded(2);
  unn::Conv2dFactor conv("x", "h", 1, 32, 6, 2, generator);
  conv->to(torch::kDouble);  // float32 sums of 9,216 products differ by more than 1e-5 relative
  const auto options = torch::TensorOptions().dtype(torch::kDouble);
  const torch::Tensor x = at::randn({2, 1, 28, 28}, generator, options);
  const torch::Tensor h = at::randn({2, 32, 12, 12}, generator, options);
  const double forward = (h * conv->message(1, {x, h})).sum().item<double>();
  const double adjoint = (x * conv->message(0, {x, h})).sum().item<double>();
  EXPECT_NEAR(forward, adjoint, 1e-10 * std::abs(forward));
}

TEST(UnnInference, CoordinateDescentNeverRaisesTheEnergy) {
  at::Generator generator = seeded(3);
  unn::Network conv = single(conv_chain(generator));
  torch::manual_seed(3);
  const torch::Tensor image = torch::rand({4, 1, 10, 10}, torch::kDouble) * 2 - 1;
  for (Schedule schedule : {Schedule::forward, Schedule::forward_backward, Schedule::random}) {
    unn::InferenceOptions options;
    options.observed["X"] = image;
    options.iterations = 4;
    options.schedule = schedule;
    options.generator = &generator;
    options.record_energy = true;
    expect_non_increasing(conv->infer(options).energy);
    // The other direction: y clamped, the image free.
    unn::InferenceOptions backward = options;
    backward.observed = {{"y", torch::eye(5, torch::kDouble).narrow(0, 0, 4)}};
    expect_non_increasing(conv->infer(backward).energy);
  }
  unn::Network attention = single(attention_graph(5, 4, generator));
  unn::InferenceOptions options;
  options.observed["X"] = torch::randn({3, 5, 4}, torch::kDouble);
  options.iterations = 3;
  options.schedule = Schedule::explicit_order;
  options.order = {"Q", "K", "V", "S", "H", "S", "V", "K", "Q"};
  options.record_energy = true;
  const unn::InferenceResult result = attention->infer(options);
  EXPECT_EQ(result.energy.size(), 1u + 3 * 9);
  expect_non_increasing(result.energy);
}

TEST(UnnInference, FirstForwardSweepIsSoftmaxAttention) {
  at::Generator generator = seeded(4);
  const int64_t n = 6, d = 4;
  unn::Graph graph = attention_graph(n, d, generator);
  unn::Network network = single(graph);
  const torch::Tensor x = torch::randn({2, n, d}, torch::kDouble);
  unn::InferenceOptions options;
  options.observed["X"] = x;
  const unn::InferenceResult result = network->infer(options);
  ASSERT_EQ(result.updates.at(0), (std::vector<std::string>{"Q", "K", "V", "S", "H"}));
  auto project = [&](int factor) {
    auto* contraction = graph->factors()[factor]->as<unn::ContractionFactorImpl>();
    return torch::matmul(x, contraction->weight.t());
  };
  const torch::Tensor q = project(0), k = project(1), v = project(2);
  const torch::Tensor expected = torch::matmul(
      torch::softmax(torch::matmul(q, k.transpose(1, 2)) / std::sqrt(double(d)), -1), v);
  EXPECT_TRUE(torch::allclose(result.state.at("H"), expected, 1e-12, 1e-12));
}

TEST(UnnInference, TreeVariableParsesAndNeverRaisesTheEnergy) {
  // The structured parser of the paper's Sec. 5: heads H and modifiers M (relu) from encoder rows,
  // arcs Y on the marginal polytope of trees through a biaffine factor.
  at::Generator generator = seeded(12);
  const int64_t n = 5, r = 6, d = 4;
  unn::Graph graph;
  graph->add_variable({"Xh", {n + 1, r}, Activation::identity}, generator);
  graph->add_variable({"Xm", {n, r}, Activation::identity}, generator);
  graph->add_variable({"H", {n + 1, d}, Activation::relu, 1.0, {d}}, generator, r);
  graph->add_variable({"M", {n, d}, Activation::relu, 1.0, {d}}, generator, r);
  graph->add_variable({"Y", {n + 1, n}, Activation::tree}, generator);
  unn::ContractionFactor head = contraction("ij,bnj,bni", {"Xh", "H"}, {d, r}, generator);
  unn::ContractionFactor modifier = contraction("ij,bnj,bni", {"Xm", "M"}, {d, r}, generator);
  unn::BiaffineFactor arcs("Y", "H", "M", d, generator);
  graph->add_factor(head);
  graph->add_factor(modifier);
  graph->add_factor(arcs);
  {
    torch::NoGradGuard no_grad;
    arcs->weight.normal_(0, 0.3, generator);  // larger than the authors' init: iterating matters
  }
  graph->to(torch::kDouble);
  unn::Network network = single(graph);
  const torch::Tensor xh = torch::randn({3, n + 1, r}, torch::kDouble);
  const torch::Tensor xm = xh.narrow(1, 1, n);
  unn::InferenceOptions options;
  options.observed = {{"Xh", xh}, {"Xm", xm}};
  const unn::InferenceResult once = network->infer(options);
  ASSERT_EQ(once.updates.at(0), (std::vector<std::string>{"H", "M", "Y"}));
  // One iteration is the plain biaffine parser.
  const torch::Tensor h = torch::relu(torch::matmul(xh, head->weight.t()) + graph->bias("H"));
  const torch::Tensor m = torch::relu(torch::matmul(xm, modifier->weight.t()) + graph->bias("M"));
  const torch::Tensor scores = torch::matmul(torch::matmul(h, arcs->weight), m.transpose(1, 2));
  EXPECT_TRUE(
      torch::allclose(once.state.at("Y"), unn::tree_marginals(scores).marginals, 1e-12, 1e-12));
  options.iterations = 4;
  options.record_energy = true;
  const unn::InferenceResult iterated = network->infer(options);
  expect_non_increasing(iterated.energy);
  EXPECT_FALSE(torch::allclose(iterated.state.at("Y"), once.state.at("Y"), 1e-6, 1e-6));
  // Every column of the arc marginals is a distribution over heads.
  EXPECT_TRUE(torch::allclose(iterated.state.at("Y").sum(1), torch::ones({3, n}, torch::kDouble)));
}

TEST(UnnInference, ClampedEntriesHoldAndThenRunsLast) {
  // A sequence whose first rows are given: only the other rows of X move, X is updated after the
  // attention variables in every iteration, and the energy still never rises.
  at::Generator generator = seeded(13);
  const int64_t n = 5, d = 4;
  unn::Network network = single(attention_graph(n, d, generator));
  const torch::Tensor x = torch::randn({2, n, d}, torch::kDouble);
  const torch::Tensor given = (torch::arange(n) < 3).view({1, n, 1}).expand({2, n, d});
  unn::InferenceOptions options;
  options.initial["X"] = torch::where(given, x, torch::zeros_like(x));
  options.clamp["X"] = given;
  options.then = {"X"};
  options.schedule = Schedule::random;
  options.generator = &generator;
  options.iterations = 3;
  options.record_energy = true;
  const unn::InferenceResult result = network->infer(options);
  for (const auto& order : result.updates) {
    ASSERT_EQ(order.size(), 6u);
    EXPECT_EQ(order.back(), "X");
  }
  const torch::Tensor filled = result.state.at("X");
  EXPECT_TRUE(torch::equal(filled.narrow(1, 0, 3), x.narrow(1, 0, 3)));
  EXPECT_GT(filled.narrow(1, 3, 2).abs().sum().item<double>(), 0.0);
  expect_non_increasing(result.energy);
  options.clamp["X"] = given.narrow(1, 0, 4);
  EXPECT_THROW_WITH(network->infer(options), std::invalid_argument,
                    "the clamp of 'X' must be boolean of shape (2, 5, 4)");
  options.initial = {{"Q", torch::zeros({2, n, d}, torch::kDouble)}};
  EXPECT_THROW_WITH(network->infer(options), std::invalid_argument,
                    "clamped variable 'X' needs initial values to hold");
}

TEST(UnnInference, CustomFactorNeedsOnlyItsEnergy) {
  // A trilinear factor written as an energy alone gives the same inference as the built-in
  // contraction with the same weight.
  struct Trilinear : unn::FactorImpl {
    explicit Trilinear(torch::Tensor w) : FactorImpl({"a", "b", "c"}), weight(std::move(w)) {}
    torch::Tensor energy(const std::vector<torch::Tensor>& x) override {
      return -torch::einsum("ijk,bi,bj,bk->b", {weight, x[0], x[1], x[2]});
    }
    torch::Tensor weight;
  };
  at::Generator generator = seeded(5);
  auto build = [&](bool custom) {
    unn::Graph graph;
    graph->add_variable({"a", {3}, Activation::identity}, generator);
    graph->add_variable({"b", {4}, Activation::tanh, 1.0, {4}}, generator, 2);
    graph->add_variable({"c", {2}, Activation::softmax}, generator);
    unn::ContractionFactor trilinear =
        contraction("ijk,bi,bj,bk", {"a", "b", "c"}, {3, 4, 2}, generator);
    if (custom) {
      graph->add_factor(std::make_shared<Trilinear>(trilinear->weight.clone()));
    } else {
      graph->add_factor(trilinear);
    }
    return graph;
  };
  generator = seeded(5);
  unn::Network built_in = single(build(false));
  generator = seeded(5);
  unn::Network custom = single(build(true));
  unn::InferenceOptions options;
  options.observed["a"] = torch::randn({2, 3});
  options.initial["c"] = torch::full({2, 2}, 0.5);
  options.iterations = 3;
  options.schedule = Schedule::forward_backward;
  EXPECT_TRUE(torch::allclose(built_in->infer(options).state.at("c"),
                              custom->infer(options).state.at("c"), 1e-6, 1e-6));
}

TEST(UnnInference, SchedulesFollowTheGraph) {
  at::Generator generator = seeded(6);
  unn::Network network = single(conv_chain(generator));
  unn::InferenceOptions options;
  options.observed["X"] = torch::zeros({1, 1, 10, 10}, torch::kDouble);
  options.schedule = Schedule::forward_backward;
  EXPECT_EQ(network->infer(options).updates.at(0),
            (std::vector<std::string>{"H1", "H2", "y", "H2"}));
  options.observed = {{"y", torch::ones({1, 5}, torch::kDouble) / 5}};
  EXPECT_EQ(network->infer(options).updates.at(0),
            (std::vector<std::string>{"H2", "H1", "X", "H1"}));
  // Jacobi: every variable from the previous state, so after one iteration from zero H2 sees
  // only its bias.
  options.schedule = Schedule::jacobi;
  const unn::InferenceResult jacobi = network->infer(options);
  const torch::Tensor bias = network->graph()->bias("H2");
  EXPECT_TRUE(torch::allclose(
      jacobi.state.at("H2")[0],
      torch::relu(bias +
                  torch::matmul(torch::ones({1, 5}, torch::kDouble) / 5,
                                network->graph()->factors()[2]->as<unn::LinearFactorImpl>()->weight)
                      .view({4, 1, 1}))));
  // Random orders are permutations of the free variables, drawn from the generator.
  options.schedule = Schedule::random;
  options.iterations = 5;
  options.generator = &generator;
  for (auto order : network->infer(options).updates) {
    std::sort(order.begin(), order.end());
    EXPECT_EQ(order, (std::vector<std::string>{"H1", "H2", "X"}));
  }
}

TEST(UnnInference, DropoutMasksStayFixedAcrossIterations) {
  at::Generator generator = seeded(7);
  unn::Network network = single(conv_chain(generator));
  unn::InferenceOptions options;
  options.observed["X"] = torch::rand({3, 1, 10, 10}, torch::kDouble);
  options.iterations = 3;
  options.schedule = Schedule::forward_backward;
  options.dropout = {{"H1", 0.5}};
  at::Generator masks = seeded(11);
  options.generator = &masks;
  const unn::InferenceResult result = network->infer(options, {"H1"});
  const torch::Tensor dropped = result.trace.at("H1")[0].eq(0);
  EXPECT_GT(dropped.sum().item<int64_t>(), 10);
  for (const torch::Tensor& h1 : result.trace.at("H1")) {
    EXPECT_TRUE(h1.eq(0).eq(dropped).all().item<bool>());
  }
  masks = seeded(11);
  EXPECT_TRUE(torch::equal(network->infer(options).state.at("y"), result.state.at("y")));
}

TEST(UnnInference, GradientsFlowThroughTheUnrolledIterations) {
  at::Generator generator = seeded(8);
  unn::Network network = single(conv_chain(generator));
  const torch::Tensor image = torch::rand({2, 1, 10, 10}, torch::kDouble) * 2 - 1;
  torch::Tensor weight = network->graph()->factors()[1]->as<unn::Conv2dFactorImpl>()->weight;
  auto loss = [&] {
    unn::InferenceOptions options;
    options.observed["X"] = image;
    options.iterations = 3;
    options.schedule = Schedule::forward_backward;
    return network->infer(options).preactivation.at("y").square().sum();
  };
  network->zero_grad();
  loss().backward();
  const torch::Tensor gradient = weight.grad().clone();
  torch::NoGradGuard no_grad;
  for (int64_t index : {0, 17, 100}) {
    const double h = 1e-6;
    double* entry = weight.data_ptr<double>() + index;
    const double saved = *entry;
    *entry = saved + h;
    const double plus = loss().item<double>();
    *entry = saved - h;
    const double minus = loss().item<double>();
    *entry = saved;
    EXPECT_NEAR(gradient.view(-1)[index].item<double>(), (plus - minus) / (2 * h), 1e-6);
  }
}

TEST(UnnInference, UntiedNetworksUseOneCopyPerIteration) {
  at::Generator generator = seeded(9);
  unn::Network untied([&](int64_t) { return conv_chain(generator); }, 2);
  unn::InferenceOptions options;
  options.observed["X"] = torch::rand({1, 1, 10, 10}, torch::kDouble);
  options.iterations = 2;
  const torch::Tensor before = untied->infer(options).state.at("y");
  {
    torch::NoGradGuard no_grad;
    untied->graph(1)->bias("y").add_(torch::arange(5, torch::kDouble));
  }
  EXPECT_FALSE(torch::allclose(untied->infer(options).state.at("y"), before));
  options.iterations = 1;  // the first copy alone is unchanged
  unn::Network first([&](int64_t) { return untied->graph(0); }, 1);
  EXPECT_TRUE(
      torch::equal(untied->infer(options).state.at("y"), first->infer(options).state.at("y")));
  options.iterations = 3;
  EXPECT_THROW_WITH(untied->infer(options), std::invalid_argument,
                    "has weights for 2 iterations, asked for 3");
}

TEST(UnnBadInput, MessagesNameWhatIsWrong) {
  at::Generator generator = seeded(10);
  unn::Graph graph = conv_chain(generator);
  EXPECT_THROW_WITH(graph->add_factor(unn::LinearFactor("H2", "nope", 4, 5, generator)),
                    std::invalid_argument, "unknown variable 'nope' (the graph has X, H1, H2, y)");
  EXPECT_THROW_WITH(graph->add_factor(unn::Conv2dFactor("X", "H1", 2, 3, 4, 2, generator)),
                    std::invalid_argument, "conv2d factor 3: input 'X' must be (2, height >= 4");
  EXPECT_THROW_WITH(graph->add_factor(unn::LinearFactor("H2", "y", 5, 5, generator)),
                    std::invalid_argument,
                    "input 'H2' of shape (4, 1, 1) has 4 entries, the weight takes 5");
  EXPECT_THROW_WITH(graph->add_variable({"y", {2}}, generator), std::invalid_argument,
                    "variable 'y' declared twice");
  EXPECT_THROW_WITH(graph->add_variable({"b", {3, 4}, Activation::identity, 1.0, {5}}, generator),
                    std::invalid_argument,
                    "bias shape (5) of variable 'b' does not broadcast to (3, 4)");
  EXPECT_THROW_WITH(graph->add_variable({"t", {3, 3}, Activation::tree}, generator),
                    std::invalid_argument,
                    "tree variable 't' must have shape (n + 1, n), got (3, 3)");
  EXPECT_THROW_WITH(contraction("ij,bi", {"a", "b"}, {2, 2}, generator), std::invalid_argument,
                    "needs subscripts for the weight and 2 variables");
  EXPECT_THROW_WITH(unn::parse_schedule("backward"), std::invalid_argument,
                    "unknown schedule 'backward' (choose forward, forward-backward");
  EXPECT_THROW_WITH(unn::parse_activation("gelu"), std::invalid_argument,
                    "unknown activation 'gelu'");

  unn::Network network = single(conv_chain(generator));
  unn::InferenceOptions options;
  EXPECT_THROW_WITH(network->infer(options), std::invalid_argument,
                    "needs at least one observed or initial variable");
  options.observed["X"] = torch::zeros({2, 1, 10, 9}, torch::kDouble);
  EXPECT_THROW_WITH(network->infer(options), std::invalid_argument,
                    "variable 'X' needs shape (2, 1, 10, 10)");
  options.observed["X"] = torch::zeros({2, 1, 10, 10}, torch::kDouble);
  options.schedule = Schedule::explicit_order;
  options.order = {"H1", "Z"};
  EXPECT_THROW_WITH(network->infer(options), std::invalid_argument, "unknown variable 'Z'");
  options.order = {"H1", "X"};
  EXPECT_THROW_WITH(network->infer(options), std::invalid_argument,
                    "the schedule names observed variable 'X'");
  options.order = {};
  EXPECT_THROW_WITH(network->infer(options), std::invalid_argument, "needs an order of variables");
  options.schedule = Schedule::random;
  EXPECT_THROW_WITH(network->infer(options), std::invalid_argument,
                    "the random schedule needs a generator");
  options.schedule = Schedule::forward;
  options.dropout = {{"H1", 0.3}};
  EXPECT_THROW_WITH(network->infer(options), std::invalid_argument, "dropout needs a generator");
  options.dropout = {{"H1", 1.0}};
  EXPECT_THROW_WITH(network->infer(options), std::invalid_argument,
                    "dropout of 'H1' must be in [0, 1)");
  options.dropout = {};
  options.iterations = 0;
  EXPECT_THROW_WITH(network->infer(options), std::invalid_argument,
                    "iterations must be >= 1, got 0");
}
