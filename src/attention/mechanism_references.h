// Float64 references of the mechanisms for the registry: each a plain dense computation with
// the N x N weights formed explicitly, independent of the fast implementations it checks.
#pragma once

#include <torch/types.h>

#include "structdiff/mechanism_registry.h"

namespace structdiff::references {

// softmax(scale q.k) over the allowed keys (dense, sparse, gather).
torch::Tensor masked_softmax(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const MechanismArguments& arguments);
// sum_j (phi(q_i).phi(k_j)) v_j / (sum_j phi(q_i).phi(k_j) + eps) with phi = elu + 1.
torch::Tensor linear(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const MechanismArguments& arguments);
// The row-normalised inner products of FAVOR+'s explicit softmax or ReLU feature maps.
torch::Tensor favor_softmax(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const MechanismArguments& arguments);
torch::Tensor favor_relu(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const MechanismArguments& arguments);
// DIFFormer's weights 1 + q~.k~ (normalised q, k) and sigmoid(q.k) (over the allowed keys),
// row-normalised.
torch::Tensor diffusivity_simple(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const MechanismArguments& arguments);
torch::Tensor diffusivity_sigmoid(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const MechanismArguments& arguments);

}  // namespace structdiff::references
