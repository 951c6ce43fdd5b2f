// Node-classification data: IDX and Planetoid-style readers on files written here, CSBM
// homophily, splits, kNN graphs and induced subgraphs.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>
#include <zlib.h>

#include "structdiff/datasets.h"
#include "support/data.h"
#include "support/expect_throw.h"
#include "support/temporary_files.h"

namespace structdiff::data {
namespace {

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A 2 x 3 array of bytes 0..5 with the IDX header for unsigned bytes.
std::vector<uint8_t> small_idx() {
  return {0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 1, 2, 3, 4, 5};
}

TEST(ReadIdx, ReadsGzipAndPlainFiles) {
  TemporaryDirectory dir;
  write_gzip(dir.file("a.gz"), small_idx());
  const std::vector<uint8_t> bytes = small_idx();
  std::ofstream(dir.file("a.idx"), std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  for (const std::string& name : {"a.gz", "a.idx"}) {
    const torch::Tensor array = read_idx(dir.file(name));
    EXPECT_EQ(array.sizes(), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(array.scalar_type(), torch::kUInt8);
    EXPECT_TRUE(array.equal(torch::arange(6, torch::kUInt8).view({2, 3})));
  }
}

TEST(ReadIdx, RejectsBadFilesByName) {
  TemporaryDirectory dir;
  std::vector<uint8_t> bad_magic = small_idx();
  bad_magic[0] = 1;
  write_gzip(dir.file("magic.gz"), bad_magic);
  EXPECT_THROW_WITH(read_idx(dir.file("magic.gz")), std::runtime_error,
                    dir.file("magic.gz") + ": bad magic number 0x01000802");

  std::vector<uint8_t> floats = small_idx();
  floats[2] = 0x0d;
  write_gzip(dir.file("floats.gz"), floats);
  EXPECT_THROW_WITH(read_idx(dir.file("floats.gz")), std::runtime_error,
                    "unsupported element type 0x0d");

  std::vector<uint8_t> truncated = small_idx();
  truncated.resize(truncated.size() - 2);
  write_gzip(dir.file("short.gz"), truncated);
  EXPECT_THROW_WITH(read_idx(dir.file("short.gz")), std::runtime_error,
                    dir.file("short.gz") + ": truncated: expected 6 data bytes, found 4");

  write_gzip(dir.file("header.gz"), {0, 0, 0x08, 3, 0, 0});
  EXPECT_THROW_WITH(read_idx(dir.file("header.gz")), std::runtime_error,
                    "truncated: the sizes of the 3 dimensions are incomplete");

  std::vector<uint8_t> longer = small_idx();
  longer.push_back(9);
  write_gzip(dir.file("long.gz"), longer);
  EXPECT_THROW_WITH(read_idx(dir.file("long.gz")), std::runtime_error,
                    "unexpected bytes after the data");

  EXPECT_THROW_WITH(read_idx(dir.file("missing.gz")), std::runtime_error,
                    dir.file("missing.gz") + ": cannot open");
}

TEST(FashionMnist, BalancedPoolWhenInstalled) {
  SKIP_WITHOUT_DATA(std::string(kFashionMnistDirectory) + "/train-images-idx3-ubyte.gz");
  const NodeDataset pool = load_fashion_mnist(kFashionMnistDirectory, 200, 1);
  EXPECT_EQ(pool.features.sizes(), (std::vector<int64_t>{200, 784}));
  EXPECT_TRUE(torch::bincount(pool.labels).equal(torch::full({10}, 20, torch::kLong)));
  EXPECT_LE(pool.features.max().item<float>(), 1.0f);
  EXPECT_EQ(pool.graph.num_entries(), 0);
}

TEST(Planetoid, ReadsATinyDirectory) {
  TemporaryDirectory dir;
  write_text(dir.file("features.txt"), "# four nodes\n1 0 0\n0 1 0\n\n0 0 1\n0.5 0.5 -1e-1\n");
  write_text(dir.file("labels.txt"), "0\n1\n2\n1\n");
  write_text(dir.file("edges.txt"), "0 1\n1 0\n1 2\n3 3\n2 3\n");
  const NodeDataset dataset = read_planetoid_directory(dir.file(""));
  EXPECT_EQ(dataset.num_nodes(), 4);
  EXPECT_EQ(dataset.features.size(1), 3);
  EXPECT_FLOAT_EQ(dataset.features[3][2].item<float>(), -0.1f);
  EXPECT_EQ(dataset.num_classes, 3);
  EXPECT_TRUE(dataset.graph.is_symmetric());
  EXPECT_EQ(dataset.graph.num_entries(), 6);  // 0-1, 1-2, 2-3 both ways; the self edge dropped
  EXPECT_FALSE(dataset.graph.contains(3, 3));
}

TEST(Planetoid, ReadsGzipFeatures) {
  TemporaryDirectory dir;
  const std::string text = "1 0\n0 2.5\n";
  write_gzip(dir.file("features.txt.gz"), std::vector<uint8_t>(text.begin(), text.end()));
  write_text(dir.file("labels.txt"), "0\n1\n");
  write_text(dir.file("edges.txt"), "0 1\n");
  const NodeDataset dataset = read_planetoid_directory(dir.file(""));
  EXPECT_TRUE(dataset.features.equal(torch::tensor({{1.0f, 0.0f}, {0.0f, 2.5f}})));
  std::filesystem::remove(dir.file("features.txt.gz"));
  EXPECT_THROW_WITH(read_planetoid_directory(dir.file("")), std::runtime_error,
                    "features.txt.gz: cannot open");
}

// The committed citation graphs have the published sizes (PyTorch Geometric's counts).
TEST(CitationDatasets, CommittedCopiesHaveThePublishedSizes) {
  struct Published {
    const char* name;
    int64_t nodes, features, classes, undirected_edges;
  };
  for (const Published& published : {Published{"cora", 2708, 1433, 7, 5278},
                                     Published{"citeseer", 3327, 3703, 6, 4552}}) {
    const NodeDataset dataset = read_planetoid_directory(
        std::string(STRUCTDIFF_SOURCE_DIR) + "/" + kPlanetoidDirectory + "/" + published.name);
    EXPECT_EQ(dataset.num_nodes(), published.nodes) << published.name;
    EXPECT_EQ(dataset.features.size(1), published.features) << published.name;
    EXPECT_EQ(dataset.num_classes, published.classes) << published.name;
    EXPECT_EQ(dataset.graph.num_entries(), 2 * published.undirected_edges) << published.name;
    EXPECT_TRUE(dataset.features.eq(0).logical_or(dataset.features.eq(1)).all().item<bool>());
  }
}

// The authors' split of Cora (seed 123), as PyTorch 2.15's torch.randperm draws it in their
// class_rand_splits (the indices and sums below came from that Python code on data/planetoid/cora).
TEST(CitationDatasets, TheAuthorsSplitIsTheirCodesDraw) {
  const NodeDataset cora = read_planetoid_directory(std::string(STRUCTDIFF_SOURCE_DIR) + "/" +
                                                    kPlanetoidDirectory + "/cora");
  const Split split = class_random_split(cora.labels, 20, 500, 1000, 123);
  ASSERT_EQ(split.train.size(0), 140);
  ASSERT_EQ(split.valid.size(0), 500);
  ASSERT_EQ(split.test.size(0), 1000);
  EXPECT_TRUE(split.train.narrow(0, 0, 6).equal(torch::tensor({1332, 1923, 2136, 530, 1110, 88})));
  EXPECT_TRUE(split.valid.narrow(0, 0, 6).equal(torch::tensor({2333, 2163, 2135, 864, 1688, 911})));
  EXPECT_TRUE(split.test.narrow(0, 0, 6).equal(torch::tensor({1554, 243, 430, 1657, 2203, 522})));
  EXPECT_EQ(split.train.sum().item<int64_t>(), 196831);
  EXPECT_EQ(split.valid.sum().item<int64_t>(), 663716);
  EXPECT_EQ(split.test.sum().item<int64_t>(), 1339962);
  EXPECT_THROW_WITH(class_random_split(cora.labels, 20, 2000, 1000, 123), std::invalid_argument,
                    "2568 unlabelled nodes are fewer than 2000 for validation and 1000 for testing");
}

TEST(CitationDatasets, RowNormalisedFeaturesSumToOneOrStayZero) {
  const torch::Tensor features = torch::tensor({{1.0f, 1.0f, 0.0f, 2.0f}, {0.0f, 0.0f, 0.0f, 0.0f}});
  EXPECT_TRUE(row_normalized(features).equal(
      torch::tensor({{0.25f, 0.25f, 0.0f, 0.5f}, {0.0f, 0.0f, 0.0f, 0.0f}})));
}

TEST(Planetoid, ErrorsNameFileAndLine) {
  TemporaryDirectory dir;
  write_text(dir.file("features.txt"), "1 0\n0 1\n");
  write_text(dir.file("labels.txt"), "0\n1\n");
  write_text(dir.file("edges.txt"), "0 1\n1 7\n");
  EXPECT_THROW_WITH(read_planetoid_directory(dir.file("")), std::runtime_error,
                    "edges.txt line 2: node 7 out of range [0, 2)");
  write_text(dir.file("edges.txt"), "0 1\n");
  write_text(dir.file("features.txt"), "1 0\n0 x\n");
  EXPECT_THROW_WITH(read_planetoid_directory(dir.file("")), std::runtime_error,
                    "features.txt line 2: 'x' is not a number");
  write_text(dir.file("features.txt"), "1 0\n0 1\n1 1\n");
  EXPECT_THROW_WITH(read_planetoid_directory(dir.file("")), std::runtime_error,
                    "2 labels for 3 nodes");
  for (const char* token : {"nan", "-inf", "1e39"}) {
    write_text(dir.file("features.txt"), std::string("1 0\n0 ") + token + "\n");
    EXPECT_THROW_WITH(read_planetoid_directory(dir.file("")), std::runtime_error,
                      std::string("features.txt line 2: '") + token + "' is not a finite float32 number");
  }
}

TEST(Csbm, HomophilyCloseToRequested) {
  for (double homophily : {0.1, 0.5, 0.9}) {
    CsbmOptions options;
    options.nodes = 2000;
    options.average_degree = 10;
    options.homophily = homophily;
    const NodeDataset dataset = make_csbm(options, 3);
    EXPECT_TRUE(dataset.graph.is_symmetric());
    EXPECT_NEAR(edge_homophily(dataset.graph, dataset.labels), homophily, 0.03);
    EXPECT_NEAR(static_cast<double>(dataset.graph.num_entries()) / options.nodes, 10.0, 0.5);
    EXPECT_EQ(dataset.features.sizes(), (std::vector<int64_t>{2000, 32}));
  }
  CsbmOptions options;
  EXPECT_TRUE(make_csbm(options, 4).features.equal(make_csbm(options, 4).features));
}

TEST(Split, SizesPerClassAndDisjoint) {
  const torch::Tensor labels = torch::arange(300, torch::kLong).remainder(5);
  const Split split = semi_supervised_split(labels, 5, 20, 100, 7);
  EXPECT_EQ(split.train.numel(), 100);
  EXPECT_EQ(split.valid.numel(), 100);
  EXPECT_EQ(split.test.numel(), 100);
  EXPECT_TRUE(torch::bincount(labels.index_select(0, split.train))
                  .equal(torch::full({5}, 20, torch::kLong)));
  const torch::Tensor all = torch::cat({split.train, split.valid, split.test});
  EXPECT_TRUE(std::get<0>(all.sort()).equal(torch::arange(300, torch::kLong)));
  EXPECT_TRUE(split.train.equal(semi_supervised_split(labels, 5, 20, 100, 7).train));
  EXPECT_FALSE(split.train.equal(semi_supervised_split(labels, 5, 20, 100, 8).train));
  EXPECT_THROW_WITH(semi_supervised_split(labels, 5, 61, 10, 7), std::invalid_argument,
                    "fewer than 61 per class");
  EXPECT_THROW_WITH(semi_supervised_split(labels, 5, 20, 200, 7), std::invalid_argument,
                    "none for testing");
  // A test count draws that many of the rest.
  const Split counted = semi_supervised_split(labels, 5, 20, 100, 7, 40);
  EXPECT_TRUE(counted.valid.equal(split.valid));
  EXPECT_TRUE(counted.test.equal(split.test.slice(0, 0, 40)));
  EXPECT_THROW_WITH(semi_supervised_split(labels, 5, 20, 100, 7, 101), std::invalid_argument,
                    "200 unlabelled nodes are fewer than 100 for validation and 101 for testing");
}

TEST(Graphs, KnnAndInducedSubgraph) {
  const torch::Tensor points = torch::tensor({{0.0f}, {1.0f}, {1.5f}, {10.0f}}).view({4, 1});
  const AttentionPattern knn = knn_graph(points, 1);
  EXPECT_TRUE(knn.is_symmetric());
  EXPECT_TRUE(knn.contains(0, 1));
  EXPECT_TRUE(knn.contains(1, 2));
  EXPECT_TRUE(knn.contains(3, 2));
  EXPECT_EQ(knn.num_entries(), 6);

  const AttentionPattern sub = induced_subgraph(knn, {3, 2, 0});  // keeps 2-3 only
  EXPECT_EQ(sub.num_queries(), 3);
  EXPECT_TRUE(sub.contains(0, 1));
  EXPECT_TRUE(sub.contains(1, 0));
  EXPECT_EQ(sub.num_entries(), 2);
  EXPECT_THROW_WITH(induced_subgraph(knn, {1, 1}), std::invalid_argument, "repeated");
}

}  // namespace
}  // namespace structdiff::data
