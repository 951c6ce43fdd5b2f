// structdiff as PyTorch operators (torch.ops.structdiff.*), in the shared library the Python
// package loads (python/structdiff): the fused sparse attention (forward and backward as CPU
// operators, differentiable through an Autograd kernel that is the library's own wiring), the linear-time
// mechanisms, the pattern builders, and model files (weights by name, a GSDM's structure and its
// C++ forward pass as the reference the Python model is tested against).
//
// Bad input raises a Python ValueError (std::invalid_argument) or RuntimeError (other failures)
// with structdiff's one-line message, never a crash.
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/library.h>
#include <torch/torch.h>

#include "structdiff/attention.h"
#include "structdiff/graph.h"
#include "structdiff/gsdm.h"
#include "structdiff/gsdm_problems.h"
#include "structdiff/model_tensors.h"
#include "structdiff/pattern.h"
#include "structdiff/sparse_attention.h"
#include "util/build_info.h"

namespace structdiff::ops {
namespace {

using torch::Tensor;

// Runs `body`, turning structdiff's exceptions into the c10 errors Python maps to ValueError and
// RuntimeError.
template <typename Body>
auto python_errors(Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::invalid_argument& error) {
    TORCH_CHECK_VALUE(false, error.what());
  } catch (const nlohmann::json::exception& error) {
    // "[json.exception.type_error.302] type must be ...": the bracketed id says nothing to a user.
    const std::string message = error.what();
    const size_t id_end = message.find("] ");
    TORCH_CHECK_VALUE(false, "malformed JSON: ",
                      id_end == std::string::npos ? message : message.substr(id_end + 2));
  } catch (const std::exception& error) {
    TORCH_CHECK(false, error.what());
  }
}

void check_sparse_inputs(const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& row_offsets, const Tensor& col_indices, double scale) {
  check_qkv(q, k, v);
  if (v.size(3) != q.size(3)) {
    throw std::invalid_argument("sparse attention needs V's head_dim (" +
                                std::to_string(v.size(3)) + ") equal to Q's (" +
                                std::to_string(q.size(3)) + ")");
  }
  if (!std::isfinite(scale)) throw std::invalid_argument("scale must be finite");
  check_csr(row_offsets, col_indices, q.size(0), q.size(2), k.size(2), q.device());
}

// ---- sparse attention --------------------------------------------------------------------------

std::tuple<Tensor, Tensor> sparse_forward_cpu(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const Tensor& row_offsets, const Tensor& col_indices,
                                              double scale) {
  return python_errors([&] {
    check_sparse_inputs(q, k, v, row_offsets, col_indices, scale);
    const SparseAttentionOutput result =
        sparse_attention_forward(q, k, v, row_offsets, col_indices, scale);
    return std::make_tuple(result.out, result.logsumexp);
  });
}

std::tuple<Tensor, Tensor, Tensor> sparse_backward_cpu(const Tensor& grad_out, const Tensor& q,
                                                       const Tensor& k, const Tensor& v,
                                                       const Tensor& out, const Tensor& logsumexp,
                                                       const Tensor& row_offsets,
                                                       const Tensor& col_indices, double scale) {
  return python_errors([&] {
    if (grad_out.sizes() != out.sizes()) {
      throw std::invalid_argument("grad_out must have the output's shape " + c10::str(out.sizes()));
    }
    const SparseAttentionGradients grads = sparse_attention_backward(
        grad_out, q, k, v, out, logsumexp, row_offsets, col_indices, Tensor(), Tensor(), scale);
    return std::make_tuple(grads.q, grads.k, grads.v);
  });
}

// Autograd through the library's one wiring of the kernels (CPU, and CUDA where built).
Tensor sparse_attention_autograd(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& row_offsets, const Tensor& col_indices,
                                 double scale) {
  return python_errors([&] {
    check_sparse_inputs(q, k, v, row_offsets, col_indices, scale);
    return sparse_attention_csr(q, k, v, row_offsets, col_indices, scale);
  });
}

Tensor sparse_attention_cpu(const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& row_offsets, const Tensor& col_indices, double scale) {
  return std::get<0>(sparse_forward_cpu(q, k, v, row_offsets, col_indices, scale));
}

// ---- the linear-time mechanisms (composites of ATen operators: autograd comes with them) -------

Tensor linear_op(const Tensor& q, const Tensor& k, const Tensor& v, double eps) {
  return python_errors([&] { return linear_attention(q, k, v, eps); });
}

Tensor favor_op(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& projection,
                const std::string& kernel, double eps) {
  return python_errors([&] {
    if (kernel != "softmax" && kernel != "relu") {
      throw std::invalid_argument("kernel must be 'softmax' or 'relu', got '" + kernel + "'");
    }
    return favor_attention(q, k, v, projection,
                           kernel == "softmax" ? FavorKernel::softmax : FavorKernel::relu, eps);
  });
}

Tensor favor_projection_op(int64_t num_features, int64_t head_dim, bool orthogonal, int64_t seed,
                           c10::ScalarType dtype) {
  return python_errors([&] {
    return favor_projection(num_features, head_dim, orthogonal,
                            at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed)),
                            dtype);
  });
}

Tensor diffusivity_op(const Tensor& q, const Tensor& k, const Tensor& v, const std::string& norm) {
  return python_errors([&] {
    if (norm != "per_node" && norm != "global") {
      throw std::invalid_argument("norm must be 'per_node' or 'global', got '" + norm + "'");
    }
    return diffusivity_simple(q, k, v,
                              norm == "per_node" ? DiffusivityNorm::per_node : DiffusivityNorm::global);
  });
}

// ---- patterns: (row_offsets (1, queries + 1), col_indices, keys) --------------------------------

std::tuple<Tensor, Tensor, int64_t> csr(const AttentionPattern& pattern) {
  const PatternBatch batch(pattern);
  return {batch.row_offsets().clone(), batch.col_indices().clone(), pattern.num_keys()};
}

std::tuple<Tensor, Tensor, int64_t> from_edges_op(int64_t num_nodes, const Tensor& edges,
                                                  bool symmetrize, bool self_edges) {
  return python_errors([&] {
    if (edges.dim() != 2 || edges.size(1) != 2 || edges.scalar_type() != torch::kLong) {
      throw std::invalid_argument("edges must be an int64 tensor of (query, key) pairs, (E, 2), got " +
                                  std::string(c10::toString(edges.scalar_type())) + " " +
                                  c10::str(edges.sizes()));
    }
    const Tensor pairs = edges.cpu().contiguous();
    std::vector<std::pair<int64_t, int64_t>> list;
    const int64_t* data = pairs.data_ptr<int64_t>();
    for (int64_t e = 0; e < pairs.size(0); ++e) list.emplace_back(data[2 * e], data[2 * e + 1]);
    patterns::EdgeOptions options;
    options.symmetrize = symmetrize;
    options.self_edges = self_edges;
    return csr(patterns::from_edges(num_nodes, list, options));
  });
}

std::tuple<Tensor, Tensor, int64_t> from_graph_spec_op(const std::string& spec) {
  return python_errors([&] {
    const bool inline_json = !spec.empty() && spec.front() == '{';
    const graph::GraphicalModel model =
        inline_json ? graph::GraphicalModel::from_json(nlohmann::json::parse(spec))
                    : graph::GraphicalModel::load(spec);
    return csr(model.compile());
  });
}

std::tuple<Tensor, Tensor, int64_t> of_problem_op(const std::string& problem,
                                                  std::vector<int64_t> size, bool intermediates,
                                                  const std::string& variant) {
  return python_errors([&] {
    const gsdm::Problem& entry = gsdm::find_problem(problem);
    gsdm::ProblemOptions options;
    options.size = std::move(size);
    options.intermediates = intermediates;
    options.variant = variant;
    return csr(entry.graph(gsdm::resolve_options(entry, options)).compile());
  });
}

patterns::Direction direction_of(const std::string& name) {
  if (name == "prefix") return patterns::Direction::prefix;
  if (name == "suffix") return patterns::Direction::suffix;
  throw std::invalid_argument("direction must be 'prefix' or 'suffix', got '" + name + "'");
}

std::tuple<Tensor, Tensor, int64_t> tracformer_encoder_op(int64_t tokens, int64_t layer,
                                                          int64_t n_max,
                                                          const std::string& direction) {
  return python_errors([&] {
    return csr(patterns::tracformer_encoder(tokens, layer, n_max, direction_of(direction)));
  });
}

std::tuple<Tensor, Tensor, int64_t> tracformer_decoder_op(int64_t tokens, int64_t num_layers,
                                                          int64_t layer,
                                                          const std::string& direction) {
  return python_errors([&] {
    return csr(patterns::tracformer_decoder(tokens, num_layers, layer, direction_of(direction)));
  });
}

std::tuple<Tensor, Tensor, int64_t> causal_op(int64_t n) {
  return python_errors([&] { return csr(patterns::causal(n)); });
}

std::tuple<Tensor, Tensor, int64_t> window_op(int64_t n, int64_t left, int64_t right) {
  return python_errors([&] { return csr(patterns::sliding_window(n, left, right)); });
}

// ---- model files -------------------------------------------------------------------------------

std::tuple<std::string, std::vector<std::string>, std::vector<Tensor>> read_model_file_op(
    const std::string& path) {
  return python_errors([&] {
    const train::ModelTensors model = train::read_model_tensors(path);
    std::vector<std::string> names;
    std::vector<Tensor> tensors;
    for (const auto& [name, tensor] : model.tensors) {
      names.push_back(name);
      tensors.push_back(tensor);
    }
    return std::make_tuple(model.metadata.dump(), names, tensors);
  });
}

// What a GSDM takes from its graph, for a model file's metadata: the pattern, and per group of
// variables sharing a projection its (width, discrete, projection) row, node ids and state
// entries.
std::tuple<Tensor, Tensor, Tensor, std::vector<Tensor>, std::vector<Tensor>> gsdm_structure_op(
    const std::string& metadata) {
  return python_errors([&] {
    const gsdm::ProblemModel built = gsdm::build_problem_model(nlohmann::json::parse(metadata));
    const gsdm::GsdmStructure& structure = *built.model->home_structure();
    const PatternBatch batch(structure.pattern);
    Tensor table = torch::empty({static_cast<int64_t>(structure.groups.size()), 3}, torch::kLong);
    std::vector<Tensor> nodes, entries;
    for (size_t g = 0; g < structure.groups.size(); ++g) {
      const gsdm::ArityGroup& group = structure.groups[g];
      table[g][0] = group.width;
      table[g][1] = static_cast<int64_t>(group.discrete);
      table[g][2] = group.projection;
      nodes.push_back(group.nodes.clone());
      entries.push_back(group.entries.clone());
    }
    return std::make_tuple(batch.row_offsets().clone(), batch.col_indices().clone(), table, nodes,
                           entries);
  });
}

// The C++ denoiser of a GSDM model file on given inputs: the reference for the Python model.
Tensor gsdm_denoise_op(const std::string& path, const Tensor& x_t, const Tensor& t,
                       const Tensor& observed) {
  return python_errors([&] {
    gsdm::ProblemModel loaded = gsdm::load_problem_model(path);
    torch::NoGradGuard no_grad;
    return loaded.model->forward(x_t, t, observed);
  });
}

std::string version_op() { return version_line(); }

}  // namespace

TORCH_LIBRARY(structdiff, m) {
  m.def("version() -> str", version_op);
  m.def("sparse_attention_forward(Tensor q, Tensor k, Tensor v, Tensor row_offsets, "
        "Tensor col_indices, float scale) -> (Tensor, Tensor)");
  m.def("sparse_attention_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, "
        "Tensor logsumexp, Tensor row_offsets, Tensor col_indices, float scale) "
        "-> (Tensor, Tensor, Tensor)");
  m.def("sparse_attention(Tensor q, Tensor k, Tensor v, Tensor row_offsets, Tensor col_indices, "
        "float scale) -> Tensor");
  m.def("linear_attention(Tensor q, Tensor k, Tensor v, float eps=1e-6) -> Tensor", linear_op);
  m.def("favor_attention(Tensor q, Tensor k, Tensor v, Tensor projection, str kernel='softmax', "
        "float eps=1e-4) -> Tensor",
        favor_op);
  m.def("favor_projection(int num_features, int head_dim, bool orthogonal=True, int seed=0, "
        "ScalarType dtype=float) -> Tensor",
        favor_projection_op);
  m.def("diffusivity_simple(Tensor q, Tensor k, Tensor v, str norm='per_node') -> Tensor",
        diffusivity_op);
  m.def("pattern_from_edges(int num_nodes, Tensor edges, bool symmetrize=False, "
        "bool self_edges=False) -> (Tensor, Tensor, int)",
        from_edges_op);
  m.def("pattern_from_graph_spec(str spec) -> (Tensor, Tensor, int)", from_graph_spec_op);
  m.def("pattern_of_problem(str problem, int[] size=[], bool intermediates=True, "
        "str variant='') -> (Tensor, Tensor, int)",
        of_problem_op);
  m.def("pattern_tracformer_encoder(int tokens, int layer, int n_max, str direction) "
        "-> (Tensor, Tensor, int)",
        tracformer_encoder_op);
  m.def("pattern_tracformer_decoder(int tokens, int num_layers, int layer, str direction) "
        "-> (Tensor, Tensor, int)",
        tracformer_decoder_op);
  m.def("pattern_causal(int n) -> (Tensor, Tensor, int)", causal_op);
  m.def("pattern_sliding_window(int n, int left, int right) -> (Tensor, Tensor, int)", window_op);
  m.def("read_model_file(str path) -> (str, str[], Tensor[])", read_model_file_op);
  m.def("gsdm_structure(str metadata) -> (Tensor, Tensor, Tensor, Tensor[], Tensor[])",
        gsdm_structure_op);
  m.def("gsdm_denoise(str path, Tensor x_t, Tensor t, Tensor observed) -> Tensor", gsdm_denoise_op);
}

TORCH_LIBRARY_IMPL(structdiff, CPU, m) {
  m.impl("sparse_attention_forward", sparse_forward_cpu);
  m.impl("sparse_attention_backward", sparse_backward_cpu);
  m.impl("sparse_attention", sparse_attention_cpu);
}

TORCH_LIBRARY_IMPL(structdiff, Autograd, m) {
  m.impl("sparse_attention", sparse_attention_autograd);
}

}  // namespace structdiff::ops
