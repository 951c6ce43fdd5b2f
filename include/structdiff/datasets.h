// Node-classification data: instances with features and labels and an observed graph over them
// (possibly without edges). Readers for (Fashion-)MNIST IDX files and a plain-text Planetoid-style
// directory, a contextual stochastic block model, kNN graphs, semi-supervised splits.
// Every reader throws std::runtime_error naming the file and what is wrong with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "structdiff/pattern.h"

namespace structdiff::data {

struct NodeDataset {
  std::string name;
  torch::Tensor features;  // (N, F) float32
  torch::Tensor labels;    // (N) int64 in [0, num_classes)
  int64_t num_classes = 0;
  AttentionPattern graph;  // symmetric adjacency over the N nodes, no self edges
  int64_t num_nodes() const { return features.size(0); }
};

// ---- graphs ------------------------------------------------------------------------------------

// Fraction of (directed) edges joining two nodes of the same class; 0 for a graph without edges.
double edge_homophily(const AttentionPattern& graph, const torch::Tensor& labels);
// The subgraph on `nodes` (distinct), renumbered in the order given.
AttentionPattern induced_subgraph(const AttentionPattern& graph, const std::vector<int64_t>& nodes);
// Each node joined to its k nearest other nodes in Euclidean distance, then symmetrised.
AttentionPattern knn_graph(const torch::Tensor& features, int64_t k);

// ---- splits ------------------------------------------------------------------------------------

struct Split {
  torch::Tensor train, valid, test;  // int64 node indices, disjoint
};
// `per_class` labelled nodes of every class, `valid` of the remaining nodes for validation, `test`
// more for testing (0: all the rest); seeded. Throws std::invalid_argument when a class or the
// rest is too small.
Split semi_supervised_split(const torch::Tensor& labels, int64_t num_classes, int64_t per_class,
                            int64_t valid, uint64_t seed, int64_t test = 0);

// The DIFFormer authors' split (qitianwu/DIFFormer, data_utils.py class_rand_splits): for each
// class in ascending label order, its nodes in index order are permuted by torch.randperm and
// the first `per_class` labelled; the rest of all classes, concatenated, is permuted once more
// and its first `valid` nodes validate, the next `test` test. The permutations come from one
// torch generator seeded with `seed` (the authors' main.py: torch.manual_seed(123), their first
// split used for every run). Throws std::invalid_argument for counts < 1 or too few nodes.
Split class_random_split(const torch::Tensor& labels, int64_t per_class, int64_t valid,
                         int64_t test, uint64_t seed);

// Each row divided by its sum (rows summing to less than 1, e.g. all-zero ones, by 1): PyTorch
// Geometric's NormalizeFeatures, which the DIFFormer authors apply to the citation graphs.
torch::Tensor row_normalized(const torch::Tensor& features);

// ---- contextual stochastic block model ---------------------------------------------------------

struct CsbmOptions {
  int64_t nodes = 1000;
  int64_t classes = 5;            // balanced
  int64_t feature_dim = 32;
  double average_degree = 8.0;    // of the undirected graph, before merging duplicate edges
  double homophily = 0.8;         // probability that an edge joins two nodes of one class
  double feature_signal = 1.0;    // class means ~ N(0, signal^2 / F I); noise ~ N(0, I)
};
NodeDataset make_csbm(const CsbmOptions& options, uint64_t seed);

// ---- Planetoid-style plain-text directory ------------------------------------------------------

// DIR/features.txt (or features.txt.gz): one line per node, F numbers separated by white space.
// DIR/labels.txt:   one line per node, a class index >= 0 (num_classes = largest + 1).
// DIR/edges.txt:    one line per undirected edge, two 0-based node indices; duplicates, both
//                   directions and self edges allowed (self edges are dropped: models add A + I).
// Blank lines and lines starting with '#' are skipped in every file.
NodeDataset read_planetoid_directory(const std::string& directory);

// The citation graphs of Planetoid (Yang et al. 2016), committed in this directory, relative to
// the repository root (data/planetoid/README.md): cora, citeseer.
inline const char* const kPlanetoidDirectory = "data/planetoid";
inline const std::vector<std::string> kCitationDatasets = {"cora", "citeseer"};

// ---- IDX (MNIST) -------------------------------------------------------------------------------

// An IDX array of unsigned bytes (type 0x08), gzip-compressed or plain: uint8 tensor with the
// file's dimensions. Checks the magic number, the dimensions, truncation (of the data or of the
// gzip stream) and trailing bytes.
torch::Tensor read_idx(const std::string& path);
// The whole text of a plain or gzip-compressed file, up to 1 GiB; throws std::runtime_error
// naming the path for a directory, an unreadable file, corrupt or truncated gzip data, or more.
std::string read_possibly_compressed_text(const std::string& path);

inline const char* const kFashionMnistDirectory = "/usr/share/datasets/fashion-mnist";
// `pool_size` Fashion-MNIST training images (a multiple of 10), the same number of each class,
// drawn with `seed`; pixels scaled to [0, 1] and flattened to 784 features; no graph edges.
NodeDataset load_fashion_mnist(const std::string& directory, int64_t pool_size, uint64_t seed);

}  // namespace structdiff::data
