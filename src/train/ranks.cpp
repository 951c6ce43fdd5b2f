// The one place structdiff meets c10d: a TCP store for the rendezvous, a Gloo process group for
// the collectives on CPU tensors and, where libtorch has NCCL, an NCCL one for GPU tensors, so
// that GPU ranks all-reduce on the GPU (made at the first collective on one). Errors come back
// as one-line std::runtime_error messages naming the rank and the address, not Gloo's own text.
#include "structdiff/ranks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include "util/text.h"

namespace structdiff::train {

struct Ranks::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#ifdef USE_C10D_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif
  std::string address;
  std::chrono::milliseconds timeout{};

  // The process group for collectives on tensors like `t`: NCCL for GPU tensors where libtorch
  // has it (Gloo stages them through the CPU otherwise), Gloo for the rest.
  c10d::Backend& backend_for(const torch::Tensor& t, int rank, int size) {
#ifdef USE_C10D_NCCL
    if (t.is_cuda()) {
      if (!nccl) {
        auto options = c10d::ProcessGroupNCCL::Options::create();
        options->timeout = timeout;
        nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
            c10::make_intrusive<c10d::PrefixStore>("nccl", store), rank, size, options);
      }
      return *nccl;
    }
#else
    (void)t, (void)rank, (void)size;
#endif
    return *gloo;
  }
};

namespace {

constexpr int64_t kBucketBytes = 25 << 20;

}  // namespace

Ranks::Ranks(std::unique_ptr<Group> group, int rank, int size)
    : group_(std::move(group)), rank_(rank), size_(size) {}

Ranks::~Ranks() = default;

std::shared_ptr<Ranks> Ranks::connect(const RankAddress& address) {
  if (address.world_size < 1 || address.rank < 0 || address.rank >= address.world_size) {
    throw std::invalid_argument("rank " + std::to_string(address.rank) + " of a world of " +
                                std::to_string(address.world_size) + ": the rank must be in 0.." +
                                std::to_string(address.world_size - 1));
  }
  if (address.port < 1 || address.port > 65535) {
    throw std::invalid_argument("port " + std::to_string(address.port) + " is not in 1..65535");
  }
  auto group = std::make_unique<Group>();
  group->address = address.host + ":" + std::to_string(address.port);
  group->timeout = address.timeout;
  const std::string where = "rank " + std::to_string(address.rank) + " of " +
                            std::to_string(address.world_size) + " at " + group->address;
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<std::uint16_t>(address.port);
    store_options.isServer = address.rank == 0;
    store_options.numWorkers = static_cast<std::size_t>(address.world_size);
    store_options.waitWorkers = true;
    store_options.timeout = address.timeout;
    group->store = c10::make_intrusive<c10d::TCPStore>(address.host, store_options);
    auto options = c10d::ProcessGroupGloo::Options::create(address.timeout);
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(address.host));
    options->threads = 2;
    group->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(group->store, address.rank,
                                                              address.world_size, options);
  } catch (const std::exception& error) {
    throw std::runtime_error(where + ": the ranks could not meet (" + message_of(error) + ")");
  }
  return std::shared_ptr<Ranks>(new Ranks(std::move(group), address.rank, address.world_size));
}

std::shared_ptr<Ranks> Ranks::from_environment(std::chrono::milliseconds timeout) {
  const char* world = std::getenv("WORLD_SIZE");
  if (world == nullptr) return nullptr;
  auto integer = [](const char* name, bool required) -> int {
    const char* text = std::getenv(name);
    if (text == nullptr) {
      if (required) throw std::invalid_argument(std::string(name) + " is not set (WORLD_SIZE is)");
      return -1;
    }
    try {
      size_t used = 0;
      const int value = std::stoi(text, &used);
      if (used != std::string(text).size()) throw std::invalid_argument("");
      return value;
    } catch (const std::exception&) {
      throw std::invalid_argument(std::string(name) + "='" + text + "' is not a whole number");
    }
  };
  RankAddress address;
  address.world_size = integer("WORLD_SIZE", true);
  if (address.world_size == 1) return nullptr;
  address.rank = integer("RANK", true);
  const char* host = std::getenv("MASTER_ADDR");
  if (host == nullptr) throw std::invalid_argument("MASTER_ADDR is not set (WORLD_SIZE is)");
  address.host = host;
  address.port = integer("MASTER_PORT", true);
  address.timeout = timeout;
  return connect(address);
}

void Ranks::average(const std::vector<torch::Tensor>& tensors) {
  if (size_ == 1) return;
  torch::NoGradGuard no_grad;
  // Buckets of one dtype, flattened into one buffer each: few, large all-reduces.
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype;
  for (const torch::Tensor& t : tensors) {
    if (t.defined()) by_dtype[t.scalar_type()].push_back(t);
  }
  for (auto& [dtype, list] : by_dtype) {
    for (size_t first = 0; first < list.size();) {
      size_t last = first;
      int64_t bytes = 0;
      while (last < list.size() && (last == first || bytes + list[last].nbytes() <= kBucketBytes)) {
        bytes += static_cast<int64_t>(list[last].nbytes());
        ++last;
      }
      std::vector<torch::Tensor> flat;
      for (size_t i = first; i < last; ++i) flat.push_back(list[i].reshape({-1}));
      std::vector<torch::Tensor> buffer{torch::cat(flat)};
      try {
        group_->backend_for(buffer[0], rank_, size_).allreduce(buffer)->wait();
      } catch (const std::exception& error) {
        throw std::runtime_error("rank " + std::to_string(rank_) + " of " +
                                 std::to_string(size_) + ": averaging gradients with the other "
                                 "ranks failed, a rank has probably stopped (" +
                                 message_of(error) + ")");
      }
      buffer[0].div_(size_);
      int64_t at = 0;
      for (size_t i = first; i < last; ++i) {
        const int64_t n = list[i].numel();
        list[i].copy_(buffer[0].narrow(0, at, n).view_as(list[i]));
        at += n;
      }
      first = last;
    }
  }
}

std::vector<double> Ranks::sum(const std::vector<double>& values) {
  if (size_ == 1 || values.empty()) return values;
  std::vector<torch::Tensor> buffer{
      torch::tensor(values, torch::TensorOptions().dtype(torch::kDouble))};
  try {
    group_->gloo->allreduce(buffer)->wait();
  } catch (const std::exception& error) {
    throw std::runtime_error("rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                             ": the other ranks stopped answering (" + message_of(error) + ")");
  }
  const torch::Tensor summed = buffer[0].contiguous();
  return std::vector<double>(summed.data_ptr<double>(), summed.data_ptr<double>() + summed.numel());
}

void Ranks::broadcast(const std::vector<torch::Tensor>& tensors) {
  if (size_ == 1) return;
  torch::NoGradGuard no_grad;  // parameters are written in place
  for (const torch::Tensor& t : tensors) {
    if (!t.defined()) continue;
    std::vector<torch::Tensor> buffer{t.is_contiguous() ? t : t.contiguous()};
    try {
      group_->backend_for(buffer[0], rank_, size_).broadcast(buffer)->wait();
    } catch (const std::exception& error) {
      throw std::runtime_error("rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                               ": receiving rank 0's weights failed (" + message_of(error) + ")");
    }
    if (!t.is_contiguous()) t.copy_(buffer[0]);
  }
}

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("no free TCP port on 127.0.0.1 for the ranks to meet");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

void check_even_split(int64_t batch, const std::shared_ptr<Ranks>& ranks) {
  if (ranks && batch % ranks->size() != 0) {
    throw std::invalid_argument("--batch " + std::to_string(batch) + " does not split evenly over " +
                                std::to_string(ranks->size()) + " ranks");
  }
}

}  // namespace structdiff::train
