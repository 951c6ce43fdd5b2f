// Shared numerical checks for every attention mechanism: a central-difference gradient checker
// (float64) and helpers comparing a mechanism against a reference.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/expect_throw.h"

namespace structdiff::testing {

// f maps the inputs to one tensor. The checker contracts f's output with a fixed random
// cotangent, so one backward pass gives the full vector-Jacobian product; each input entry is
// then perturbed by +-eps and the directional derivative compared with it.
// Returns an empty string on success, otherwise a description of the worst entry.
inline std::string check_gradients(
    const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& f,
    std::vector<torch::Tensor> inputs, double eps = 1e-6, double atol = 1e-7,
    double rtol = 1e-5) {
  for (auto& x : inputs) {
    if (x.scalar_type() != torch::kDouble) return "check_gradients needs float64 inputs";
    x = x.detach().clone().set_requires_grad(true);
  }
  torch::Tensor out = f(inputs);
  torch::Tensor cotangent =
      torch::randn(out.sizes(), torch::TensorOptions().dtype(torch::kDouble));
  torch::Tensor objective = (out * cotangent).sum();
  std::vector<torch::Tensor> analytic = torch::autograd::grad({objective}, inputs,
                                                              /*grad_outputs=*/{},
                                                              /*retain_graph=*/false,
                                                              /*create_graph=*/false,
                                                              /*allow_unused=*/true);
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> plain;
  for (const auto& x : inputs) plain.push_back(x.detach().clone());
  for (size_t which = 0; which < plain.size(); ++which) {
    torch::Tensor flat = plain[which].view({-1});
    torch::Tensor grad = analytic[which].defined() ? analytic[which].reshape({-1})
                                                   : torch::zeros_like(flat);
    auto* data = flat.data_ptr<double>();
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double saved = data[i];
      data[i] = saved + eps;
      const double up = (f(plain) * cotangent).sum().item<double>();
      data[i] = saved - eps;
      const double down = (f(plain) * cotangent).sum().item<double>();
      data[i] = saved;
      const double numeric = (up - down) / (2 * eps);
      const double exact = grad[i].item<double>();
      if (std::abs(numeric - exact) > atol + rtol * std::abs(numeric)) {
        return "input " + std::to_string(which) + " entry " + std::to_string(i) +
               ": analytic " + std::to_string(exact) + " vs numeric " + std::to_string(numeric);
      }
    }
  }
  return "";
}

// Forward and all input gradients of `actual` equal those of `reference` (same cotangent).
inline void expect_same_function(
    const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& actual,
    const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& reference,
    const std::vector<torch::Tensor>& inputs, double atol = 1e-10, double rtol = 1e-9) {
  std::vector<torch::Tensor> a_in, r_in;
  for (const auto& x : inputs) {
    a_in.push_back(x.detach().clone().set_requires_grad(true));
    r_in.push_back(x.detach().clone().set_requires_grad(true));
  }
  torch::Tensor a = actual(a_in);
  torch::Tensor r = reference(r_in);
  ASSERT_EQ(a.sizes(), r.sizes());
  EXPECT_TRUE(torch::allclose(a, r, rtol, atol))
      << "forward differs, max abs diff " << (a - r).abs().max().item<double>();
  EXPECT_FALSE(torch::isnan(a).any().item<bool>()) << "forward has NaN";
  torch::Tensor cotangent = torch::randn(a.sizes(), a.options());
  auto ga = torch::autograd::grad({(a * cotangent).sum()}, a_in, {}, false, false, true);
  auto gr = torch::autograd::grad({(r * cotangent).sum()}, r_in, {}, false, false, true);
  for (size_t i = 0; i < inputs.size(); ++i) {
    torch::Tensor x = ga[i].defined() ? ga[i] : torch::zeros_like(inputs[i]);
    torch::Tensor y = gr[i].defined() ? gr[i] : torch::zeros_like(inputs[i]);
    EXPECT_TRUE(torch::allclose(x, y, rtol, atol))
        << "gradient of input " << i << " differs, max abs diff "
        << (x - y).abs().max().item<double>();
    EXPECT_FALSE(torch::isnan(x).any().item<bool>()) << "gradient " << i << " has NaN";
  }
}

}  // namespace structdiff::testing
