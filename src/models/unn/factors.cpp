// The built-in factors of the undirected-network engine, each with its energy and its messages in
// closed form (tests check them against the autograd messages of FactorImpl::message).
#include <cmath>
#include <set>
#include <sstream>
#include <stdexcept>

#include <torch/torch.h>

#include "structdiff/unn.h"
#include "util/text.h"

namespace structdiff::unn {
namespace {


int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// PyTorch's default layer initialisation, kaiming_uniform(a = sqrt 5): U(+-1 / sqrt(fan_in)).
torch::Tensor uniform_weight(const std::vector<int64_t>& shape, int64_t fan_in,
                             at::Generator& generator) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return torch::empty(shape).uniform_(-bound, bound, generator);
}

torch::Tensor per_example_dot(const torch::Tensor& a, const torch::Tensor& b) {
  return (a * b).reshape({a.size(0), -1}).sum(1);
}

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument(message);
}

}  // namespace

// ---- linear -------------------------------------------------------------------------------------

LinearFactorImpl::LinearFactorImpl(std::string in, std::string out, int64_t in_features,
                                   int64_t out_features, at::Generator& generator,
                                   torch::Tensor offset, bool rows)
    : FactorImpl({std::move(in), std::move(out)}), rows_(rows) {
  require(in_features >= 1 && out_features >= 1, "linear factor needs positive feature counts");
  weight = register_parameter("weight",
                              uniform_weight({out_features, in_features}, in_features, generator));
  if (offset.defined()) offset_ = register_buffer("offset", offset);
}

torch::Tensor LinearFactorImpl::energy(const std::vector<torch::Tensor>& values) {
  return -per_example_dot(values[1], message(1, values));
}

torch::Tensor LinearFactorImpl::message(size_t target, const std::vector<torch::Tensor>& values) {
  if (target == 1) {
    torch::Tensor in = values[0];
    if (offset_.defined()) in = in + offset_;
    if (rows_) return torch::matmul(in, weight.t());
    return torch::matmul(in.flatten(1), weight.t()).view(values[1].sizes());
  }
  if (rows_) return torch::matmul(values[1], weight);
  return torch::matmul(values[1].flatten(1), weight).view(values[0].sizes());
}

void LinearFactorImpl::check_shapes(const std::vector<std::vector<int64_t>>& shapes) const {
  if (rows_) {
    std::vector<int64_t> in = shapes[0], out = shapes[1];
    require(!in.empty() && in.back() == weight.size(1) && !out.empty() &&
                out.back() == weight.size(0) &&
                std::vector<int64_t>(in.begin(), in.end() - 1) ==
                    std::vector<int64_t>(out.begin(), out.end() - 1),
            "rows of '" + variables()[0] + "' " + shape_text(in) + " and '" + variables()[1] +
                "' " + shape_text(out) + " must be (..., " + std::to_string(weight.size(1)) +
                ") and (..., " + std::to_string(weight.size(0)) + ") with the same leading axes");
  } else {
    require(numel(shapes[0]) == weight.size(1),
            "input '" + variables()[0] + "' of shape " + shape_text(shapes[0]) + " has " +
                std::to_string(numel(shapes[0])) + " entries, the weight takes " +
                std::to_string(weight.size(1)));
    require(numel(shapes[1]) == weight.size(0),
            "output '" + variables()[1] + "' of shape " + shape_text(shapes[1]) + " has " +
                std::to_string(numel(shapes[1])) + " entries, the weight gives " +
                std::to_string(weight.size(0)));
  }
  if (offset_.defined()) {
    require(offset_.sizes() == at::IntArrayRef(shapes[0]),
            "the offset must have the input's shape " + shape_text(shapes[0]));
  }
}

// ---- conv2d -------------------------------------------------------------------------------------

Conv2dFactorImpl::Conv2dFactorImpl(std::string in, std::string out, int64_t in_channels,
                                   int64_t out_channels, int64_t kernel, int64_t stride,
                                   at::Generator& generator)
    : FactorImpl({std::move(in), std::move(out)}), stride_(stride) {
  require(in_channels >= 1 && out_channels >= 1 && kernel >= 1 && stride >= 1,
          "conv2d factor needs positive channels, kernel and stride");
  weight = register_parameter("weight", uniform_weight({out_channels, in_channels, kernel, kernel},
                                                       in_channels * kernel * kernel, generator));
}

torch::Tensor Conv2dFactorImpl::energy(const std::vector<torch::Tensor>& values) {
  return -per_example_dot(values[1], message(1, values));
}

torch::Tensor Conv2dFactorImpl::message(size_t target, const std::vector<torch::Tensor>& values) {
  if (target == 1) return torch::conv2d(values[0], weight, {}, stride_);
  // The adjoint of the strided convolution; output padding restores the rows and columns the
  // forward convolution did not reach.
  const int64_t kernel = weight.size(2);
  const int64_t pad_h = values[0].size(2) - ((values[1].size(2) - 1) * stride_ + kernel);
  const int64_t pad_w = values[0].size(3) - ((values[1].size(3) - 1) * stride_ + kernel);
  return torch::conv_transpose2d(values[1], weight, {}, stride_, 0, {pad_h, pad_w});
}

void Conv2dFactorImpl::check_shapes(const std::vector<std::vector<int64_t>>& shapes) const {
  const int64_t kernel = weight.size(2);
  require(shapes[0].size() == 3 && shapes[0][0] == weight.size(1) && shapes[0][1] >= kernel &&
              shapes[0][2] >= kernel,
          "input '" + variables()[0] + "' must be (" + std::to_string(weight.size(1)) +
              ", height >= " + std::to_string(kernel) + ", width >= " + std::to_string(kernel) +
              "), got " + shape_text(shapes[0]));
  const std::vector<int64_t> expected = {weight.size(0), (shapes[0][1] - kernel) / stride_ + 1,
                                         (shapes[0][2] - kernel) / stride_ + 1};
  require(shapes[1] == expected, "output '" + variables()[1] + "' must be " + shape_text(expected) +
                                     ", got " + shape_text(shapes[1]));
}

// ---- contraction --------------------------------------------------------------------------------

ContractionFactorImpl::ContractionFactorImpl(const std::string& equation,
                                             std::vector<std::string> variables,
                                             std::vector<int64_t> weight_shape,
                                             at::Generator& generator)
    : FactorImpl(std::move(variables)) {
  std::string inputs = equation;
  const size_t arrow = inputs.find("->");
  if (arrow != std::string::npos) {
    require(inputs.substr(arrow + 2) == "b",
            "contraction '" + equation + "' must sum to the batch axis ('->b')");
    inputs = inputs.substr(0, arrow);
  }
  std::vector<std::string> parts;
  std::stringstream stream(inputs);
  for (std::string part; std::getline(stream, part, ',');) parts.push_back(part);
  require(parts.size() == FactorImpl::variables().size() + 1,
          "contraction '" + equation + "' needs subscripts for the weight and " +
              std::to_string(FactorImpl::variables().size()) + " variables");
  weight_subscripts_ = parts[0];
  variable_subscripts_.assign(parts.begin() + 1, parts.end());
  require(weight_subscripts_.find('b') == std::string::npos,
          "contraction '" + equation + "': the weight's subscripts must not use 'b'");
  require(weight_subscripts_.size() == weight_shape.size() && !weight_shape.empty(),
          "contraction '" + equation + "': the weight has " + std::to_string(weight_shape.size()) +
              " axes, its subscripts name " + std::to_string(weight_subscripts_.size()));
  for (const std::string& s : variable_subscripts_) {
    require(!s.empty() && s[0] == 'b' && s.find('b', 1) == std::string::npos,
            "contraction '" + equation + "': each variable's subscripts start with 'b' once");
  }
  weight = register_parameter(
      "weight", uniform_weight(weight_shape, numel(weight_shape) / weight_shape[0], generator));
}

torch::Tensor ContractionFactorImpl::energy(const std::vector<torch::Tensor>& values) {
  std::string equation = weight_subscripts_;
  std::vector<torch::Tensor> operands = {weight};
  for (size_t i = 0; i < values.size(); ++i) {
    equation += "," + variable_subscripts_[i];
    operands.push_back(values[i]);
  }
  return -torch::einsum(equation + "->b", operands);
}

torch::Tensor ContractionFactorImpl::message(size_t target,
                                             const std::vector<torch::Tensor>& values) {
  std::string equation = weight_subscripts_;
  std::vector<torch::Tensor> operands = {weight};
  for (size_t i = 0; i < values.size(); ++i) {
    if (i == target) continue;
    equation += "," + variable_subscripts_[i];
    operands.push_back(values[i]);
  }
  return torch::einsum(equation + "->" + variable_subscripts_[target], operands);
}

void ContractionFactorImpl::check_shapes(const std::vector<std::vector<int64_t>>& shapes) const {
  std::map<char, int64_t> sizes;
  auto bind = [&](const std::string& subscripts, const std::vector<int64_t>& shape,
                  const std::string& what) {
    require(subscripts.size() == shape.size(),
            what + " has shape " + shape_text(shape) + " but subscripts '" + subscripts + "'");
    for (size_t i = 0; i < shape.size(); ++i) {
      const auto found = sizes.find(subscripts[i]);
      require(found == sizes.end() || found->second == shape[i],
              what + ": axis '" + std::string(1, subscripts[i]) + "' has size " +
                  std::to_string(shape[i]) + ", elsewhere " +
                  (found == sizes.end() ? "" : std::to_string(found->second)));
      sizes[subscripts[i]] = shape[i];
    }
  };
  bind(weight_subscripts_, std::vector<int64_t>(weight.sizes().begin(), weight.sizes().end()),
       "the weight");
  for (size_t i = 0; i < shapes.size(); ++i) {
    bind(variable_subscripts_[i].substr(1), shapes[i], "variable '" + variables()[i] + "'");
  }
}

// ---- attention ----------------------------------------------------------------------------------

namespace {

void check_attention_shapes(const std::vector<int64_t>& scores, const std::vector<int64_t>& a,
                            const std::vector<int64_t>& b, const std::vector<std::string>& names) {
  require(scores.size() == 2 && scores[0] == scores[1],
          "scores '" + names[0] + "' must be (n, n), got " + shape_text(scores));
  require(a.size() == 2 && a[0] == scores[0] && b == a,
          "'" + names[1] + "' and '" + names[2] + "' must both be (" + std::to_string(scores[0]) +
              ", d), got " + shape_text(a) + " and " + shape_text(b));
}

}  // namespace

AttentionScoreFactorImpl::AttentionScoreFactorImpl(std::string scores, std::string queries,
                                                   std::string keys)
    : FactorImpl({std::move(scores), std::move(queries), std::move(keys)}) {}

torch::Tensor AttentionScoreFactorImpl::energy(const std::vector<torch::Tensor>& values) {
  return -per_example_dot(values[0], message(0, values));
}

torch::Tensor AttentionScoreFactorImpl::message(size_t target,
                                                const std::vector<torch::Tensor>& values) {
  const torch::Tensor &s = values[0], &q = values[1], &k = values[2];
  if (target == 0) return torch::bmm(q, k.transpose(1, 2));  // Q K^T
  if (target == 1) return torch::bmm(s, k);                  // S K
  return torch::bmm(s.transpose(1, 2), q);                   // S^T Q
}

void AttentionScoreFactorImpl::check_shapes(const std::vector<std::vector<int64_t>>& shapes) const {
  check_attention_shapes(shapes[0], shapes[1], shapes[2], variables());
}

AttentionValueFactorImpl::AttentionValueFactorImpl(std::string output, std::string scores,
                                                   std::string values)
    : FactorImpl({std::move(output), std::move(scores), std::move(values)}) {}

torch::Tensor AttentionValueFactorImpl::energy(const std::vector<torch::Tensor>& values) {
  return -per_example_dot(values[0], message(0, values));
}

torch::Tensor AttentionValueFactorImpl::message(size_t target,
                                                const std::vector<torch::Tensor>& values) {
  const torch::Tensor &h = values[0], &s = values[1], &v = values[2];
  if (target == 0) return torch::bmm(s, v);                  // S V
  if (target == 1) return torch::bmm(h, v.transpose(1, 2));  // H V^T
  return torch::bmm(s.transpose(1, 2), h);                   // S^T H
}

void AttentionValueFactorImpl::check_shapes(const std::vector<std::vector<int64_t>>& shapes) const {
  check_attention_shapes(shapes[1], shapes[0], shapes[2],
                         {variables()[1], variables()[0], variables()[2]});
}

// ---- biaffine -----------------------------------------------------------------------------------

BiaffineFactorImpl::BiaffineFactorImpl(std::string arcs, std::string heads, std::string modifiers,
                                       int64_t features, at::Generator& generator)
    : FactorImpl({std::move(arcs), std::move(heads), std::move(modifiers)}) {
  require(features >= 1, "biaffine factor needs a positive feature count");
  weight = register_parameter("weight",
                              torch::empty({features, features}).normal_(0.0, 0.01, generator));
}

torch::Tensor BiaffineFactorImpl::energy(const std::vector<torch::Tensor>& values) {
  return -per_example_dot(values[0], message(0, values));
}

torch::Tensor BiaffineFactorImpl::message(size_t target, const std::vector<torch::Tensor>& values) {
  const torch::Tensor &y = values[0], &h = values[1], &m = values[2];
  if (target == 0) return torch::matmul(torch::matmul(h, weight), m.transpose(1, 2));  // H V M^T
  if (target == 1) return torch::matmul(torch::bmm(y, m), weight.t());                 // Y M V^T
  return torch::matmul(torch::bmm(y.transpose(1, 2), h), weight);                      // Y^T H V
}

void BiaffineFactorImpl::check_shapes(const std::vector<std::vector<int64_t>>& shapes) const {
  const auto &y = shapes[0], &h = shapes[1], &m = shapes[2];
  require(y.size() == 2 && y[0] == y[1] + 1,
          "arcs '" + variables()[0] + "' must be (n + 1, n), got " + shape_text(y));
  const int64_t d = weight.size(0);
  require(h == std::vector<int64_t>{y[0], d} && m == std::vector<int64_t>{y[1], d},
          "heads '" + variables()[1] + "' must be " + shape_text({y[0], d}) + " and modifiers '" +
              variables()[2] + "' " + shape_text({y[1], d}) + ", got " + shape_text(h) + " and " +
              shape_text(m));
}

}  // namespace structdiff::unn
