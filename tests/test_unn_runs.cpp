// The UNN's runs as library calls (unn_runs.h): the task's defaults fill what a request leaves
// empty, a trained model file evaluates with its energy traces, the task names round-trip, and
// requests a task cannot run are refused with the option's name.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "structdiff/loop_options.h"
#include "structdiff/unn_runs.h"
#include "support/expect_throw.h"
#include "support/temporary_files.h"

namespace unn = structdiff::unn;
namespace train = structdiff::train;

namespace {

TEST(UnnRuns, LoopChoicesReplaceOnlyTheSettingsThatWereChosen) {
  train::LoopOptions base;
  base.steps = 7;
  base.learning_rate = 0.5;
  base.clip_norm = 3;
  base.validate_every = 2;
  train::LoopChoices choices;
  choices.learning_rate = 0.25;
  choices.validate_every = 0;
  const train::LoopOptions out = train::with_choices(base, choices);
  EXPECT_EQ(out.steps, 7);
  EXPECT_EQ(out.learning_rate, 0.25);
  EXPECT_EQ(out.clip_norm, 3);
  EXPECT_EQ(out.validate_every, 0);
}

TEST(UnnRuns, TaskNamesRoundTripAndAnUnknownOneIsNamed) {
  for (const std::string& name : unn::task_names()) EXPECT_EQ(unn::task_name(unn::parse_task(name)), name);
  EXPECT_EQ(unn::task_names().size(), 4u);
  EXPECT_THROW_WITH(unn::parse_task("parse-tree"), std::invalid_argument,
                    "unknown UNN task 'parse-tree' (choose mnist-conv, fashion-conv, attention or parse)");
}

// A request may name every schedule but "explicit", which is a network's own order.
TEST(UnnRuns, ScheduleChoicesAreTheNamedOrdersButExplicit) {
  EXPECT_EQ(unn::schedule_choices(),
            (std::vector<std::string>{"forward", "forward-backward", "random", "jacobi"}));
  for (const std::string& name : unn::schedule_choices()) {
    EXPECT_EQ(unn::schedule_name(unn::parse_schedule(name)), name);
  }
}

// The attention task's defaults (batch 256, lr 1e-4, 150,000 steps) give way to the request's
// choices; the file it writes records them and evaluates with a non-increasing energy.
TEST(UnnRuns, AttentionTaskTrainsWithTheRequestsChoicesAndEvaluates) {
  unn::TrainRequest request;
  request.task = unn::Task::attention;
  TemporaryDirectory directory;
  request.out_path = directory.file("attention.pt");
  request.attention.d_model = 8;
  request.loop_choices.steps = 2;
  request.loop_choices.validate_every = 2;
  request.dev_size = 100;
  request.batch = 16;
  request.loop.show_progress = false;
  const unn::TrainReport report = unn::train_task(request);
  EXPECT_EQ(report.metadata.at("steps").get<int64_t>(), 2);
  EXPECT_EQ(report.metadata.at("batch").get<int64_t>(), 16);
  EXPECT_EQ(report.metadata.at("lr").get<double>(), 1e-4);  // the task's, not the conv default
  EXPECT_NE(report.summary.find("test masked-token accuracy"), std::string::npos) << report.summary;

  unn::EvalRequest eval;
  eval.model_path = request.out_path;
  eval.iterations = 2;
  eval.schedule = unn::Schedule::random;
  eval.energy_examples = 3;
  const unn::EvalReport scored = unn::evaluate(eval);
  EXPECT_EQ(scored.record.at("iterations").get<int64_t>(), 2);
  EXPECT_EQ(scored.record.at("energy_sequences").get<int64_t>(), 3);
  EXPECT_EQ(scored.record.at("energy").at("fill").at("non_increasing_share").get<double>(), 1.0);
  ASSERT_EQ(scored.lines.size(), 2u);

  unn::GenerateRequest generate;
  generate.model_path = request.out_path;
  EXPECT_THROW_WITH(unn::generate(generate), std::invalid_argument, "has no class prototypes");
}

TEST(UnnRuns, TheParseTaskRefusesASchedule) {
  unn::TrainRequest request;
  request.task = unn::Task::parse;
  TemporaryDirectory directory;
  request.out_path = directory.file("parse.pt");
  request.schedule = unn::Schedule::random;
  EXPECT_THROW_WITH(unn::train_task(request), std::invalid_argument, "the parse task updates H, M, then Y");
}

}  // namespace
