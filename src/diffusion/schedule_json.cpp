#include <stdexcept>

#include "structdiff/diffusion.h"

namespace structdiff::diffusion {

void to_json(nlohmann::json& j, const ScheduleConfig& config) {
  j = {{"kind", config.kind == ScheduleKind::linear ? "linear" : "cosine"},
          {"steps", config.steps},
          {"beta_start", config.beta_start},
          {"beta_end", config.beta_end},
          {"cosine_offset", config.cosine_offset}};
}

void from_json(const nlohmann::json& j, ScheduleConfig& config) {
  config.kind = parse_schedule(j.at("kind").get<std::string>());
  config.steps = j.at("steps").get<int64_t>();
  config.beta_start = j.at("beta_start").get<double>();
  config.beta_end = j.at("beta_end").get<double>();
  config.cosine_offset = j.at("cosine_offset").get<double>();
}

}  // namespace structdiff::diffusion
