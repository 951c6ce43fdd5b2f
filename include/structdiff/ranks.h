// Data-parallel training on PyTorch's distributed engine (c10d, over Gloo): this process's place
// among the ranks of a run, and the few collectives the training loop needs. Every use of c10d
// stays in src/train/ranks.cpp, whose API moves between libtorch versions.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

namespace structdiff::train {

struct RankAddress {
  std::string host = "127.0.0.1";  // where rank 0 serves the rendezvous (a TCP store)
  int port = 29500;
  int rank = 0;
  int world_size = 1;
  // How long a collective waits for the other ranks before failing: a rank that died makes the
  // others stop with an error instead of hanging.
  std::chrono::milliseconds timeout = std::chrono::seconds(120);
};

class Ranks {
 public:
  // Joins (rank 0: serves) the rendezvous at host:port. Throws std::runtime_error naming the
  // address when the other ranks do not join within the timeout.
  static std::shared_ptr<Ranks> connect(const RankAddress& address);
  // The rendezvous torchrun describes in the environment (MASTER_ADDR, MASTER_PORT, RANK,
  // WORLD_SIZE), joined; null when WORLD_SIZE is unset or 1. Throws std::invalid_argument naming a
  // missing or malformed variable.
  static std::shared_ptr<Ranks> from_environment(std::chrono::milliseconds timeout);
  ~Ranks();
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  // In place: each tensor becomes its mean over the ranks (gradients), all-reduced in buckets of
  // about 25 MB of one dtype.
  void average(const std::vector<torch::Tensor>& tensors);
  // Element-wise sums over the ranks: the decisions every rank must take alike (stop on a signal,
  // a non-finite loss, a time limit) travel this way.
  std::vector<double> sum(const std::vector<double>& values);
  // Rank 0's values of the tensors, on every rank.
  void broadcast(const std::vector<torch::Tensor>& tensors);

 private:
  struct Group;  // the c10d process group, in ranks.cpp
  Ranks(std::unique_ptr<Group> group, int rank, int size);
  std::unique_ptr<Group> group_;
  int rank_ = 0, size_ = 1;
};

// A TCP port on the loopback that no one listens on now (the kernel's choice), for a local
// rendezvous. Throws std::runtime_error when there is none.
int free_loopback_port();

// Throws std::invalid_argument ("--batch B does not split evenly over N ranks") unless `batch`
// rows split evenly over the ranks (null or one: always).
void check_even_split(int64_t batch, const std::shared_ptr<Ranks>& ranks);

// One rank's share of a batch: rows [begin, end) of `total`. A task trained on several ranks
// draws the whole batch from the shared data and noise streams (so every rank sees the batch a
// single process would) and computes its loss on its own rows, as their mean.
struct Shard {
  int64_t index = 0, count = 1;
  int64_t begin(int64_t total) const { return total * index / count; }
  int64_t end(int64_t total) const { return total * (index + 1) / count; }
};

}  // namespace structdiff::train
