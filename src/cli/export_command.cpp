// `structdiff export`: a model file's weights for PyTorch without structdiff
// (train::export_model).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "structdiff/model_export.h"

namespace structdiff::cli {
namespace {

struct ExportCommand {
  std::string model_path;
  train::ExportFormat format = train::ExportFormat::safetensors;
  std::string out;
};

void run_export(const ExportCommand& c) {
  const train::ExportReport report = train::export_model(c.model_path, c.format, c.out);
  std::printf("wrote %s (%s): %ld tensors, %ld values, model kind '%s'\n", c.out.c_str(),
              train::export_format_name(c.format).c_str(), static_cast<long>(report.tensors),
              static_cast<long>(report.values), report.kind.c_str());
}

}  // namespace

void register_export(CLI::App& app, const GlobalOptions&, Action& action) {
  auto c = std::make_shared<ExportCommand>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a model file's weights for PyTorch: safetensors or a torch.load-able dict");
  cmd->add_option("--model", c->model_path, "Model file (any kind)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option_function<std::string>(
         "--format", [c](const std::string& name) { c->format = train::parse_export_format(name); },
         "safetensors or torch")
      ->check(CLI::IsMember(train::export_format_names()))
      ->default_str(train::export_format_name(c->format));
  cmd->add_option("--out", c->out, "File to write")->required()->check(writable_file());
  cmd->callback([c, &action] { action = [c] { run_export(*c); }; });
}

}  // namespace structdiff::cli
