#include "structdiff/mask_schedule.h"

#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

#include "structdiff/enum_names.h"

namespace structdiff::diffusion {

namespace {
const auto kKindNames = enum_names<MaskScheduleKind>("mask schedule", {
    {MaskScheduleKind::linear, "linear"},
    {MaskScheduleKind::cosine, "cosine"},
});
}  // namespace

MaskScheduleKind parse_mask_schedule(const std::string& name) { return kKindNames.parse(name); }

std::vector<std::string> mask_schedule_names() { return kKindNames.choices(); }

std::string mask_schedule_name(MaskScheduleKind kind) { return kKindNames.name(kind); }

torch::Tensor mask_alpha(MaskScheduleKind kind, const torch::Tensor& t) {
  if (kind == MaskScheduleKind::linear) return 1 - t;
  return torch::cos(t * (M_PI / 2));
}

torch::Tensor mask_elbo_weight(MaskScheduleKind kind, const torch::Tensor& t) {
  if (kind == MaskScheduleKind::linear) return 1 / t;
  // (pi/2) sin(pi t/2) / (1 - cos(pi t/2)) = (pi/2) / tan(pi t/4): the second form keeps its
  // precision as t -> 0, where the first divides two vanishing numbers.
  return (M_PI / 2) / torch::tan(t * (M_PI / 4));
}

torch::Tensor mask_time_of_alpha(MaskScheduleKind kind, const torch::Tensor& alpha) {
  const torch::Tensor a = alpha.clamp(0, 1);
  if (kind == MaskScheduleKind::linear) return 1 - a;
  return torch::acos(a) * (2 / M_PI);
}

}  // namespace structdiff::diffusion
