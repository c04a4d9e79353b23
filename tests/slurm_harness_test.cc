// LocalSlurm (local_slurm.h) against the real thing: a one-node cluster started once for the suite
// runs batch jobs, hands out fake GPUs, runs jobs side by side, keeps finished jobs visible, and
// preempts a `debug` job for a `high` one. Needs root and Slurm (scripts/test installs it).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include "local_slurm.h"

namespace hyperpack::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

constexpr const char* kSlurmctld = "/usr/sbin/slurmctld";

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Polls `done` every 100 ms until it holds or `timeout` passes; returns whether it held.
bool WaitUntil(const std::function<bool()>& done, seconds timeout) {
  for (auto deadline = Clock::now() + timeout;;) {
    if (done()) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The pids of processes whose environment points at `conf`: daemons, slurmstepd, jobs.
std::vector<int> ProcessesOf(const std::string& conf) {
  std::vector<int> pids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string env = ReadText("/proc/" + pid + "/environ");
    if (env.find("SLURM_CONF=" + conf + '\0') != std::string::npos) pids.push_back(std::stoi(pid));
  }
  return pids;
}

bool Alive(int pid) {
  std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

class SlurmHarnessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kSlurmctld)) return;
    auto start = Clock::now();
    slurm_ = LocalSlurm::Start({}, &start_error_).release();
    std::cout << "LocalSlurm::Start took " << SecondsSince(start) << " s" << std::endl;
  }

  static void TearDownTestSuite() {
    auto start = Clock::now();
    delete slurm_;
    slurm_ = nullptr;
    std::cout << "~LocalSlurm took " << SecondsSince(start) << " s" << std::endl;
  }

  void SetUp() override {
    if (!std::filesystem::exists(kSlurmctld)) {
      GTEST_SKIP() << kSlurmctld << " is missing: scripts/test installs Slurm (slurmctld, slurmd, "
                   << "slurm-client, munge)";
    }
    ASSERT_NE(slurm_, nullptr) << "LocalSlurm::Start failed: " << start_error_;
  }

  // Submits a batch job; returns its id, or "" (with a failure recorded).
  static std::string Submit(std::vector<std::string> args) {
    args.insert(args.begin(), {"sbatch", "--parsable"});
    std::string output;
    int code = slurm_->Run(args, &output);
    EXPECT_EQ(code, 0) << output;
    output = Trim(output);
    if (code != 0 || output.empty() ||
        output.find_first_not_of("0123456789") != std::string::npos) {
      ADD_FAILURE() << "sbatch said: " << output;
      return "";
    }
    return output;
  }

  // The job's state (RUNNING, PENDING, COMPLETED...), finished jobs included.
  static std::string State(const std::string& job) {
    std::string output;
    slurm_->Run({"squeue", "--noheader", "--states=all", "--jobs=" + job, "--format=%T"}, &output);
    return Trim(output);
  }

  static bool WaitForState(const std::string& job, const std::string& state, seconds timeout) {
    return WaitUntil([&] { return State(job) == state; }, timeout);
  }

  static std::string ShowJob(const std::string& job) {
    std::string output;
    slurm_->Run({"scontrol", "show", "job", job}, &output);
    return output;
  }

  // Cancels the jobs and waits until they have ended.
  static void Cancel(const std::vector<std::string>& jobs) {
    std::string output;
    std::vector<std::string> argv = {"scancel"};
    argv.insert(argv.end(), jobs.begin(), jobs.end());
    EXPECT_EQ(slurm_->Run(argv, &output), 0) << output;
    for (const std::string& job : jobs) {
      EXPECT_TRUE(WaitForState(job, "CANCELLED", seconds(20))) << job << ": " << State(job);
    }
  }

  static LocalSlurm* slurm_;
  static std::string start_error_;
};

LocalSlurm* SlurmHarnessTest::slurm_ = nullptr;
std::string SlurmHarnessTest::start_error_;

TEST_F(SlurmHarnessTest, ClientsFindTheClusterThroughEnv) {
  EXPECT_EQ(slurm_->conf(), slurm_->dir() + "/slurm.conf");
  EXPECT_TRUE(std::filesystem::exists(slurm_->conf()));
  ASSERT_FALSE(slurm_->Env().empty());
  EXPECT_EQ(slurm_->Env()[0], "SLURM_CONF=" + slurm_->conf());
  std::string output;
  ASSERT_EQ(slurm_->Run({"sinfo", "--noheader", "--format=%P %T %c %G"}, &output), 0) << output;
  EXPECT_NE(output.find("debug* idle"), std::string::npos) << output;
  EXPECT_NE(output.find("high idle"), std::string::npos) << output;
  EXPECT_NE(output.find("gpu:4"), std::string::npos) << output;
}

TEST_F(SlurmHarnessTest, BatchJobRunsAndWritesItsOutput) {
  std::string out = slurm_->dir() + "/hi-%j.out";
  std::string job = Submit({"--output=" + out, "--wrap=echo hi"});
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(WaitForState(job, "COMPLETED", seconds(20))) << State(job) << "\n" << ShowJob(job);
  EXPECT_EQ(ReadText(slurm_->dir() + "/hi-" + job + ".out"), "hi\n");
}

TEST_F(SlurmHarnessTest, JobAskingForTwoGpusSeesTwoDevices) {
  std::string out = slurm_->dir() + "/gpus-%j.out";
  std::string job =
      Submit({"--gpus-per-node=2", "--output=" + out, "--wrap=echo \"$CUDA_VISIBLE_DEVICES\""});
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(WaitForState(job, "COMPLETED", seconds(20))) << State(job) << "\n" << ShowJob(job);
  std::string devices = Trim(ReadText(slurm_->dir() + "/gpus-" + job + ".out"));
  std::cout << "CUDA_VISIBLE_DEVICES=" << devices << std::endl;
  std::vector<std::string> entries;
  std::stringstream in(devices);
  for (std::string entry; std::getline(in, entry, ',');) entries.push_back(entry);
  EXPECT_EQ(entries.size(), 2u) << devices;
}

TEST_F(SlurmHarnessTest, TwoOneCpuJobsRunAtTheSameTime) {
  if (slurm_->cpus() < 2) GTEST_SKIP() << "the node has " << slurm_->cpus() << " CPU";
  std::string a = Submit({"--cpus-per-task=1", "--wrap=sleep 60"});
  std::string b = Submit({"--cpus-per-task=1", "--wrap=sleep 60"});
  ASSERT_FALSE(a.empty() || b.empty());
  std::string seen;
  bool together = WaitUntil(
      [&] {
        std::string output;
        slurm_->Run({"squeue", "--noheader", "--jobs=" + a + "," + b, "--format=%i %T"}, &output);
        seen = output;
        return output.find(a + " RUNNING") != std::string::npos &&
               output.find(b + " RUNNING") != std::string::npos;
      },
      seconds(20));
  EXPECT_TRUE(together) << "squeue said:\n" << seen;
  Cancel({a, b});
}

TEST_F(SlurmHarnessTest, FinishedJobShowsAsCompletedInSqueue) {
  std::string job = Submit({"--output=/dev/null", "--wrap=true"});
  ASSERT_FALSE(job.empty());
  std::string output;
  bool completed = WaitUntil(
      [&] {
        slurm_->Run({"squeue", "--noheader", "--states=all", "--format=%i %T"}, &output);
        return output.find(job + " COMPLETED") != std::string::npos;
      },
      seconds(20));
  EXPECT_TRUE(completed) << output;
}

TEST_F(SlurmHarnessTest, SacctReadsFinishedJobsFromTheCompletionFile) {
  std::string job = Submit({"--output=/dev/null", "--wrap=true"});
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(WaitForState(job, "COMPLETED", seconds(20))) << State(job);

  // Without slurmdbd there is no accounting storage ...
  std::string plain;
  int plain_code = slurm_->Run({"sacct", "--jobs=" + job}, &plain);
  std::cout << "sacct exited " << plain_code << ": " << Trim(plain) << std::endl;
  EXPECT_NE(plain_code, 0);
  EXPECT_NE(plain.find("accounting storage is disabled"), std::string::npos) << plain;

  // ... but -c reads the job completion file.
  std::string completion;
  bool listed = WaitUntil(
      [&] {
        slurm_->Run({"sacct", "-c", "--noheader", "--jobs=" + job, "--format=JobID,State"},
                    &completion);
        return completion.find("COMPLETED") != std::string::npos;
      },
      seconds(10));
  std::cout << "sacct -c: " << Trim(completion) << std::endl;
  EXPECT_TRUE(listed) << completion;
  EXPECT_EQ(completion.find(job), completion.find_first_not_of(' ')) << completion;
}

TEST_F(SlurmHarnessTest, JobInHighPartitionPreemptsAndRequeuesDebugJob) {
  std::string low = Submit({"--partition=debug", "--cpus-per-task=1", "--wrap=sleep 300"});
  ASSERT_FALSE(low.empty());
  ASSERT_TRUE(WaitForState(low, "RUNNING", seconds(20))) << State(low);

  auto start = Clock::now();
  std::string high = Submit(
      {"--partition=high", "--cpus-per-task=" + std::to_string(slurm_->cpus()), "--wrap=sleep 2"});
  ASSERT_FALSE(high.empty());
  std::vector<std::string> seen = {"RUNNING"};  // the low job's states, each change once
  bool preempted = WaitUntil(
      [&] {
        std::string state = State(low);
        if (!state.empty() && state != seen.back()) seen.push_back(state);
        return state == "PENDING" && State(high) == "RUNNING";
      },
      seconds(30));
  std::string states;
  for (const std::string& s : seen) states += (states.empty() ? "" : " -> ") + s;
  std::cout << "debug job " << low << ": " << states << " (" << SecondsSince(start) << " s)"
            << std::endl;
  EXPECT_TRUE(preempted) << states << "\n" << ShowJob(low);
  std::string shown = ShowJob(low);
  EXPECT_NE(shown.find("Restarts=1"), std::string::npos) << shown;

  // A requeued job waits ~2 minutes for its begin time; released, it runs again once high is done.
  std::string output;
  EXPECT_EQ(slurm_->Run({"scontrol", "update", "JobId=" + low, "StartTime=now"}, &output), 0)
      << output;
  EXPECT_TRUE(WaitForState(high, "COMPLETED", seconds(30))) << State(high);
  EXPECT_TRUE(WaitForState(low, "RUNNING", seconds(30))) << ShowJob(low);
  Cancel({low});
}

// A second cluster beside the suite's, with no GPUs and one CPU, stopped while a job runs.
TEST_F(SlurmHarnessTest, StoppingLeavesNoProcessOrFileBehind) {
  std::string error;
  auto start = Clock::now();
  std::unique_ptr<LocalSlurm> other = LocalSlurm::Start({.gpus = 0, .cpus = 1}, &error);
  ASSERT_NE(other, nullptr) << error;
  std::cout << "second LocalSlurm::Start took " << SecondsSince(start) << " s" << std::endl;
  std::string output;
  ASSERT_EQ(other->Run({"sbatch", "--wrap=sleep 300"}, &output), 0) << output;
  ASSERT_TRUE(WaitUntil(
      [&] {
        other->Run({"squeue", "--noheader", "--format=%T"}, &output);
        return Trim(output) == "RUNNING";
      },
      seconds(20)))
      << output;
  std::string conf = other->conf(), dir = other->dir();
  // squeue says RUNNING once the job is allocated, before slurmstepd has started its script, so
  // wait for the job's own sleep to appear.
  const std::string job_sleep = std::string("sleep") + '\0' + "300" + '\0';  // its cmdline
  std::vector<int> pids;
  bool sleeping = WaitUntil(
      [&] {
        pids = ProcessesOf(conf);
        for (int pid : pids)
          if (ReadText("/proc/" + std::to_string(pid) + "/cmdline") == job_sleep) return true;
        return false;
      },
      seconds(20));
  EXPECT_TRUE(sleeping) << pids.size() << " processes of the cluster, none the job's sleep";
  // munged (no SLURM_CONF of its own is needed, but it inherits it), slurmctld, slurmd,
  // slurmstepd and the job's shell and sleep.
  EXPECT_GE(pids.size(), 5u);

  start = Clock::now();
  other.reset();
  std::cout << "stopping it with a running job took " << SecondsSince(start) << " s" << std::endl;
  for (int pid : pids) EXPECT_FALSE(Alive(pid)) << "pid " << pid << " is still running";
  EXPECT_FALSE(std::filesystem::exists(dir));
  // The suite's cluster is unharmed.
  EXPECT_EQ(slurm_->Run({"sinfo", "--noheader", "--format=%T"}, &output), 0) << output;
}

TEST_F(SlurmHarnessTest, StartSaysWhyWhenTheNodeCannotJoin) {
  std::string error;
  auto start = Clock::now();
  std::unique_ptr<LocalSlurm> bad = LocalSlurm::Start({.gpus = 0, .cpus = 4096}, &error);
  EXPECT_EQ(bad, nullptr);
  std::cout << "failed Start took " << SecondsSince(start) << " s:\n" << error << std::endl;
  EXPECT_NE(error.find("the node is"), std::string::npos) << error;
  EXPECT_NE(error.find("slurmd's log"), std::string::npos) << error;
}

}  // namespace
}  // namespace hyperpack::testing
