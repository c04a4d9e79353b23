// `hyperpack export STUDY --format tensorboard -o DIR` on a study that ran: the files it writes,
// read back with the event codec (the bytes are checked against TensorBoard's own writer in
// tensorboard_test and against the published .proto files by bench/tfevents_check.sh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "hyperpack/report/report.h"
#include "hyperpack/scheduler/runner.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/tensorboard/events.h"
#include "study_run_fixture.h"
#include "test_util.h"

namespace hyperpack::report {
namespace {

namespace fs = std::filesystem;
namespace tb = hyperpack::tensorboard;
using hyperpack::testing::WriteFile;
using ::testing::HasSubstr;

// Every record's data of the one event file in `dir` (not below it).
std::vector<std::string> Records(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    EXPECT_THAT(entry.path().filename().string(), HasSubstr("tfevents"));
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    tb::RecordReader reader;
    reader.Feed(bytes.str());
    for (;;) {
      auto next = reader.Next();
      EXPECT_TRUE(next.ok()) << next.status().message();
      if (!next.ok() || !*next) break;
      out.push_back(**next);
    }
    EXPECT_EQ(reader.buffered_bytes(), 0u);
  }
  return out;
}

class TensorboardExportTest : public hyperpack::testing::StudyRunFixture {};

TEST_F(TensorboardExportTest, EachTrialIsARunWithItsScalarsAndTheStudyIsAnHParamsExperiment) {
  WriteFile(dir_ / "t.sh", R"(for e in 1 2 3; do echo "{\"epoch\": $e, \"loss\": $e.5}"; done
)");
  study::StudySpec spec = Spec(R"(name: s
objective: {metric: loss, direction: minimize, strategy: min}
search_space:
  lr: {type: float, low: 0.01, high: 0.1, log: true}
  opt: [sgd, adam]
trial: {command: "sh t.sh"}
budget: {max_trials: 2}
)");
  spec.trial.workdir = dir_.path().string();
  ASSERT_TRUE(Run(spec).ok()) << output_.str();
  auto db = storage::Storage::Open(db_path_);
  ASSERT_TRUE(db.ok());
  const fs::path logs = dir_ / "logs";
  ASSERT_TRUE(ExportTensorboard(**db, "s", logs.string()).ok());

  // The experiment: one record after the file version, the HParams plugin's.
  std::vector<std::string> top = Records(logs);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_THAT(top[1], HasSubstr("_hparams_/experiment"));
  EXPECT_THAT(top[1], HasSubstr("lr"));
  for (int trial : {0, 1}) {
    std::vector<std::string> records = Records(logs / ("trial-000" + std::to_string(trial)));
    ASSERT_EQ(records.size(), 7u);  // version, session start, 3 steps, the value, session end
    EXPECT_THAT(records[1], HasSubstr("_hparams_/session_start_info"));
    EXPECT_THAT(records[6], HasSubstr("_hparams_/session_end_info"));
    std::map<std::pair<std::string, int64_t>, double> scalars;
    for (const std::string& r : records) {
      auto decoded = tb::DecodeScalars(r);
      ASSERT_TRUE(decoded.ok()) << decoded.status().message();
      for (const tb::Scalar& s : *decoded)
        if (s.tag.rfind("_hparams_", 0) != 0) scalars[{s.tag, s.step}] = s.value;
    }
    EXPECT_FLOAT_EQ((scalars[{"loss", 1}]), 1.5);
    EXPECT_FLOAT_EQ((scalars[{"loss", 3}]), 3.5);
    EXPECT_FLOAT_EQ((scalars[{"hyperpack/objective", 3}]), 1.5);  // strategy min: the trial's value
  }
  // Only into a new or empty directory: nothing there is overwritten.
  Status again = ExportTensorboard(**db, "s", logs.string());
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(again.message(), HasSubstr("exists and is not empty"));
}

}  // namespace
}  // namespace hyperpack::report
