// Loop settings whose defaults depend on another choice of the same request (a task, a dataset).
#pragma once

#include <cstdint>
#include <optional>

#include "structdiff/train.h"

namespace structdiff::train {

// Each setting left empty takes the default of the choice it depends on.
struct LoopChoices {
  std::optional<int64_t> steps;
  std::optional<double> learning_rate;
  std::optional<double> clip_norm;
  std::optional<int64_t> validate_every;
};

// `options` with the choices that were made in place of its fields.
LoopOptions with_choices(LoopOptions options, const LoopChoices& choices);

}  // namespace structdiff::train
