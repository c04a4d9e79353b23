// A fixture for tests that run a study in-process with RunStudy: a temporary directory, a real
// SQLite file in it, and the run's progress captured in output_.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "hyperpack/scheduler/runner.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"
#include "test_util.h"

namespace hyperpack::testing {

class StudyRunFixture : public ::testing::Test {
 protected:
  // Parses `yaml` written to study.yaml in the test's directory (relative paths resolve there).
  study::StudySpec Spec(const std::string& yaml) {
    std::string path = dir_ / "study.yaml";
    WriteFile(path, yaml);
    study::ParseOutcome parsed = study::LoadStudyFile(path);
    EXPECT_TRUE(parsed.spec) << parsed.ErrorText();
    return parsed.spec ? *parsed.spec : study::StudySpec();
  }

  // Runs it against the test's database: no signal handlers, a one-second kill grace.
  Result<scheduler::RunSummary> Run(const study::StudySpec& spec, scheduler::RunOptions o = {}) {
    o.storage_path = db_path_;
    o.progress = scheduler::RunOptions::Progress::kLog;
    o.out = &output_;
    o.handle_signals = false;
    o.kill_grace_s = 1;
    return scheduler::RunStudy(spec, o);
  }

  std::vector<storage::TrialRecord> Trials(const std::string& study = "s") {
    auto db = storage::Storage::Open(db_path_);
    EXPECT_TRUE(db.ok()) << db.status().message();
    auto found = (*db)->FindStudy(study).value();
    EXPECT_TRUE(found.has_value());
    return found ? (*db)->ListTrials(found->id).value() : std::vector<storage::TrialRecord>();
  }

  std::vector<storage::MetricPoint> Metrics(int trial, const std::string& study = "s") {
    auto db = storage::Storage::Open(db_path_).value();
    auto found = db->FindStudy(study).value();
    return db->TrialMetrics(found->id, trial).value();
  }

  TempDir dir_;
  std::string db_path_ = dir_ / "h.db";
  std::ostringstream output_;
};

}  // namespace hyperpack::testing
