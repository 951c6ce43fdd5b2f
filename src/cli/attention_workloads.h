// Named attention workloads shared by `structdiff bench attention` and `structdiff pattern`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "structdiff/attention_measure.h"

namespace structdiff::cli {

std::vector<std::string> attention_workload_names();
AttentionWorkload make_attention_workload(const std::string& name, uint64_t seed);

}  // namespace structdiff::cli
