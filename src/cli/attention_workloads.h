// Named attention workloads shared by `structdiff bench attention` and `structdiff pattern`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "structdiff/pattern.h"

namespace structdiff::cli {

struct AttentionWorkload {
  std::string name;
  std::string description;
  int64_t batch = 0, heads = 0, head_dim = 0;
  // One attention call per pattern, e.g. one per layer of an encoder stack.
  std::vector<AttentionPattern> patterns;
};

std::vector<std::string> attention_workload_names();
AttentionWorkload make_attention_workload(const std::string& name, uint64_t seed);

}  // namespace structdiff::cli
