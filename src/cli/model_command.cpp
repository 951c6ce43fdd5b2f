// `structdiff model info`: what any model file holds, without building its model.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "structdiff/model_file.h"

namespace structdiff::cli {
namespace {

struct InfoCommand {
  std::string model_path;
  bool json = false;
};

void run_info(const InfoCommand& c) {
  const nlohmann::json info = train::model_info(c.model_path);
  if (c.json) {
    std::printf("%s\n", info.dump(2).c_str());
    return;
  }
  auto text = [](const nlohmann::json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); };
  std::printf("file            %s\n", c.model_path.c_str());
  std::printf("kind            %s\n", text(info["kind"]).c_str());
  std::printf("step            %s\n", info["step"].is_null() ? "not recorded" : text(info["step"]).c_str());
  std::printf("parameters      %s\n", text(info["parameters"]).c_str());
  std::printf("weights_sha256  %s\n", text(info["weights_sha256"]).c_str());
  std::printf("resumable       %s\n", info["resumable"].get<bool>() ? "yes (optimizer and EMA state)" : "no (weights only)");
  if (info["provenance"].is_null()) {
    std::printf("provenance      none (written before structdiff recorded it)\n");
  } else {
    for (const auto& item : info["provenance"].items()) {
      std::printf("%-15s %s\n", item.key().c_str(), text(item.value()).c_str());
    }
  }
  std::printf("config          %s\n", info["config"].dump().c_str());
  std::printf("recorded        %s\n", info["recorded"].dump().c_str());
}

}  // namespace

void register_model(CLI::App& app, const GlobalOptions& /*global*/, Action& action) {
  CLI::App* model = app.add_subcommand("model", "Inspect model files");
  model->require_subcommand(1);
  auto c = std::make_shared<InfoCommand>();
  CLI::App* info = model->add_subcommand(
      "info", "Kind, config, provenance, step, parameter count and weights_sha256 of a model file");
  info->add_option("model", c->model_path, "Model or checkpoint file")->required()->check(CLI::ExistingFile);
  info->add_flag("--json", c->json, "Print JSON (to compare files, or feed a script)");
  info->callback([c, &action] {
    action = [c] { run_info(*c); };
  });
}

}  // namespace structdiff::cli
