// Named attention workloads: the patterns of the systems' graphs (Sudoku, GSDM's BCMF, the
// Tracformer's encoder) and two references (random, full), with the batch and heads they run at;
// `structdiff bench attention` times them, `structdiff pattern` describes them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "structdiff/attention_measure.h"

namespace structdiff {

std::vector<std::string> attention_workload_names();
// Throws std::invalid_argument for a name outside attention_workload_names(); `seed` draws the
// random workload's pattern.
AttentionWorkload make_attention_workload(const std::string& name, uint64_t seed);

}  // namespace structdiff
