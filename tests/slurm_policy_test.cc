// Slurm policy on what Slurm really prints and what sbatch is really told.
#include "slurm_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "hyperpack/env_vars.h"

namespace hyperpack::scheduler::slurm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Strings = std::vector<std::string>;
using Env = std::map<std::string, std::string>;

bool Same(const RankExit& a, const RankExit& b) { return a.kind == b.kind && a.code == b.code; }

bool Has(const Strings& args, const std::string& arg) {
  return std::find(args.begin(), args.end(), arg) != args.end();
}

bool HasPrefix(const Strings& args, const std::string& prefix) {
  return std::any_of(args.begin(), args.end(),
                     [&](const std::string& a) { return a.rfind(prefix, 0) == 0; });
}

// ---- ExpandHostList ----

TEST(ExpandHostListTest, ExpandsRangesAndSinglesKeepingTheWrittenWidth) {
  auto hosts = ExpandHostList("node[01-03,7],gpu-a1");
  ASSERT_TRUE(hosts.ok()) << hosts.status().message();
  EXPECT_THAT(*hosts, ElementsAre("node01", "node02", "node03", "node7", "gpu-a1"));
}

TEST(ExpandHostListTest, RangeCrossingAPowerOfTenKeepsTheStartsWidth) {
  auto padded = ExpandHostList("n[098-101]");
  ASSERT_TRUE(padded.ok());
  EXPECT_THAT(*padded, ElementsAre("n098", "n099", "n100", "n101"));
  auto plain = ExpandHostList("n[9-10]");
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(*plain, ElementsAre("n9", "n10"));
}

TEST(ExpandHostListTest, SeveralGroupsInOneNameExpandAsAProduct) {
  auto hosts = ExpandHostList("a[1-2]b[3-4]");
  ASSERT_TRUE(hosts.ok());
  EXPECT_THAT(*hosts, ElementsAre("a1b3", "a1b4", "a2b3", "a2b4"));
}

TEST(ExpandHostListTest, SingleHostAndSuffixAfterTheGroup) {
  auto one = ExpandHostList("login1");
  ASSERT_TRUE(one.ok());
  EXPECT_THAT(*one, ElementsAre("login1"));
  auto suffixed = ExpandHostList("rack[1-2]-gpu");
  ASSERT_TRUE(suffixed.ok());
  EXPECT_THAT(*suffixed, ElementsAre("rack1-gpu", "rack2-gpu"));
}

TEST(ExpandHostListTest, EmptyAndSqueuesNullAreNoHosts) {
  auto empty = ExpandHostList("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  auto null = ExpandHostList("(null)");
  ASSERT_TRUE(null.ok());
  EXPECT_TRUE(null->empty());
}

TEST(ExpandHostListTest, MalformedListsAreErrors) {
  for (const char* bad : {"node[01-03", "node01-03]", "node[3-1]", "node[]", "node[a-b]",
                          "node[1-2", "a,,b", "node[[1]]", "node[1-]", "n[0-1000000]"}) {
    auto hosts = ExpandHostList(bad);
    EXPECT_FALSE(hosts.ok()) << bad;
    if (!hosts.ok()) {
      EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_THAT(hosts.status().message(), HasSubstr(bad));
    }
  }
}

TEST(ExpandHostListTest, AMillionHostsIsTheMostOneListMayName) {
  auto hosts = ExpandHostList("n[1-1000000]");
  ASSERT_TRUE(hosts.ok());
  EXPECT_EQ(hosts->size(), 1000000u);
  EXPECT_FALSE(ExpandHostList("a[1-1000]b[1-1001]").ok());
}

// ---- ShapeFor ----

TEST(ShapeForTest, OneGpuIsOneNodeOneTaskOneGpu) {
  study::SlurmSpec spec;
  spec.gpus_per_node = 4;
  auto shape = ShapeFor(spec, Demand{1, 0});
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->nodes, 1);
  EXPECT_EQ(shape->tasks_per_node, 1);
  EXPECT_EQ(shape->gpus_per_node, 1);
  EXPECT_EQ(shape->cpus_per_task, 0);
}

TEST(ShapeForTest, EightGpusOnFourGpuNodesIsTwoNodesOfFour) {
  study::SlurmSpec spec;
  spec.gpus_per_node = 4;
  spec.cpus_per_task = 6;
  auto shape = ShapeFor(spec, Demand{8, 0});
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->nodes, 2);
  EXPECT_EQ(shape->tasks_per_node, 4);
  EXPECT_EQ(shape->gpus_per_node, 4);
  EXPECT_EQ(shape->cpus_per_task, 6);
}

TEST(ShapeForTest, UnknownNodeSizeKeepsTheGangOnOneNode) {
  study::SlurmSpec spec;  // gpus_per_node 0
  auto shape = ShapeFor(spec, Demand{8, 0});
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->nodes, 1);
  EXPECT_EQ(shape->tasks_per_node, 8);
  EXPECT_EQ(shape->gpus_per_node, 8);
}

TEST(ShapeForTest, AGangThatDoesNotFillWholeNodesIsAnErrorNamingGpusPerNode) {
  study::SlurmSpec spec;
  spec.gpus_per_node = 4;
  auto shape = ShapeFor(spec, Demand{6, 0});
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("gpus_per_node"));
  EXPECT_THAT(shape.status().message(), HasSubstr("6 GPUs"));
}

TEST(ShapeForTest, CpuTrialIsOneTaskWithItsSlotsAndAtLeastOne) {
  study::SlurmSpec spec;
  spec.gpus_per_node = 4;
  spec.cpus_per_task = 6;  // for GPU ranks only
  auto shape = ShapeFor(spec, Demand{0, 3});
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->nodes, 1);
  EXPECT_EQ(shape->tasks_per_node, 1);
  EXPECT_EQ(shape->gpus_per_node, 0);
  EXPECT_EQ(shape->cpus_per_task, 3);
  auto none = ShapeFor(spec, Demand{0, 0});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->cpus_per_task, 1);
}

// ---- Names and comments ----

TEST(JobNameTest, StudyColonsAndSpacesBecomeUnderscores) {
  JobTag tag{"my study:v2", 17, 3, 2};
  EXPECT_EQ(JobName(tag), "hp:my_study_v2:17");
  EXPECT_EQ(JobNamePrefix("my study:v2"), "hp:my_study_v2:");
  EXPECT_EQ(JobName(tag).rfind(JobNamePrefix(tag.study), 0), 0u);
}

TEST(JobCommentTest, WritesEveryFieldAndEncodesSpacesEqualsAndPercent) {
  JobTag tag{"lr sweep=50%", 12, 4, 3};
  EXPECT_EQ(JobComment(tag), "hyperpack study=lr%20sweep%3D50%25 trial=12 root=4 attempt=3");
}

TEST(JobCommentTest, RoundTripsAStudyNameWithSpacesEqualsAndPercent) {
  for (const char* study : {"plain", "lr sweep=50%", "a%20b", "x=y=z", "%", "tab\there", "a|b"}) {
    JobTag tag{study, 9, 7, 2};
    auto back = ParseJobComment(JobComment(tag));
    ASSERT_TRUE(back.has_value()) << study;
    EXPECT_EQ(back->study, study);
    EXPECT_EQ(back->trial, 9);
    EXPECT_EQ(back->root, 7);
    EXPECT_EQ(back->attempt, 2);
  }
}

TEST(JobCommentTest, CommentsThatAreNotOursOrAreBrokenAreNotParsed) {
  EXPECT_FALSE(ParseJobComment("(null)"));
  EXPECT_FALSE(ParseJobComment(""));
  EXPECT_FALSE(ParseJobComment("nightly build"));
  EXPECT_FALSE(ParseJobComment("hyperpack study=s trial=1 root=1"));  // no attempt
  EXPECT_FALSE(ParseJobComment("hyperpack study=s trial=x root=1 attempt=1"));
  EXPECT_FALSE(ParseJobComment("hyperpack study=s trial=-1 root=1 attempt=1"));
  EXPECT_FALSE(ParseJobComment("hyperpack study=bad%2 trial=1 root=1 attempt=1"));
  EXPECT_FALSE(ParseJobComment("hyperpack study=bad%zz trial=1 root=1 attempt=1"));
  EXPECT_FALSE(ParseJobComment("hyperpack study=s trial=1 root=1 attempt=1 stray"));
}

// ---- SbatchArgs ----

TEST(SbatchArgsTest, AFullSpecGivesEveryFlagInOrderWithExtraArgsLast) {
  study::SlurmSpec spec;
  spec.partition = "gpu";
  spec.account = "proj42";
  spec.qos = "high";
  spec.constraint = "a100";
  spec.time_limit_s = 7200;
  spec.mem = "64G";
  spec.signal = "USR1@90";
  spec.extra_args = {"--exclusive", "--mail-type=END"};
  JobShape shape{2, 4, 4, 8};
  JobTag tag{"sweep", 5, 5, 1};
  EXPECT_THAT(
      SbatchArgs(spec, shape, tag, "/runs/sweep/trial-5"),
      ElementsAre("--parsable", "--job-name=hp:sweep:5",
                  "--comment=hyperpack study=sweep trial=5 root=5 attempt=1", "--nodes=2",
                  "--ntasks-per-node=4", "--gpus-per-node=4", "--cpus-per-task=8", "--mem=64G",
                  "--partition=gpu", "--account=proj42", "--qos=high", "--constraint=a100",
                  "--time=120", "--signal=USR1@90", "--output=/runs/sweep/trial-5/slurm-%j.out",
                  "--error=/runs/sweep/trial-5/slurm-%j.out", "--open-mode=append", "--requeue",
                  "--exclusive", "--mail-type=END"));
}

TEST(SbatchArgsTest, EmptyKeysAskForNothing) {
  study::SlurmSpec spec;
  spec.signal = "";
  JobShape shape;  // one node, one task, no GPU, no cpus asked
  Strings args = SbatchArgs(spec, shape, JobTag{"s", 1, 1, 1}, "/l");
  for (const char* absent : {"--gpus-per-node", "--gres", "--cpus-per-task", "--mem", "--partition",
                             "--account", "--qos", "--constraint", "--time", "--signal"})
    EXPECT_FALSE(HasPrefix(args, absent)) << absent;
  EXPECT_TRUE(Has(args, "--nodes=1"));
  EXPECT_TRUE(Has(args, "--ntasks-per-node=1"));
  EXPECT_EQ(args.back(), "--requeue");
  EXPECT_EQ(args.size(), 9u);
}

TEST(SbatchArgsTest, DefaultSignalIsAskedFor) {
  study::SlurmSpec spec;
  Strings args = SbatchArgs(spec, JobShape{}, JobTag{"s", 1, 1, 1}, "/l");
  EXPECT_TRUE(Has(args, "--signal=USR1@90"));
}

TEST(SbatchArgsTest, GresAsksForGpusTheOldWay) {
  study::SlurmSpec spec;
  spec.gres = true;
  Strings args = SbatchArgs(spec, JobShape{1, 2, 2, 0}, JobTag{"s", 1, 1, 1}, "/l");
  EXPECT_TRUE(Has(args, "--gres=gpu:2"));
  EXPECT_FALSE(HasPrefix(args, "--gpus-per-node"));
}

// A share of a GPU is one task on its shards of one GPU: its fraction of them, or its memory's
// over the partition's GPU memory, whichever is more, rounded up.
TEST(ShapeForTest, AShareIsOneTaskOnItsShardsOfOneGpuRoundedUp) {
  study::SlurmSpec spec;
  spec.gpu_shards = 8;
  spec.gpu_memory_mb = 81920;
  spec.cpus_per_task = 4;
  struct Case {
    GpuShare share;
    int shards;
  };
  for (Case c : {Case{{0, 250}, 2}, Case{{0, 300}, 3}, Case{{0, 1}, 1}, Case{{0, 1000}, 8},
                 Case{{10240, 0}, 1}, Case{{10241, 0}, 2}, Case{{20480, 125}, 2},
                 Case{{20480, 500}, 4}, Case{{81920, 0}, 8}}) {
    SCOPED_TRACE(ShareText(c.share));
    Demand d;
    d.share = c.share;
    auto shape = ShapeFor(spec, d);
    ASSERT_TRUE(shape.ok()) << shape.status().message();
    EXPECT_EQ(shape->shards, c.shards);
    EXPECT_EQ(shape->nodes, 1);
    EXPECT_EQ(shape->tasks_per_node, 1);
    EXPECT_EQ(shape->gpus_per_node, 0);
    EXPECT_EQ(shape->cpus_per_task, 4);
    Strings args = SbatchArgs(spec, *shape, JobTag{"s", 1, 1, 1}, "/l");
    EXPECT_TRUE(Has(args, "--gres=shard:" + std::to_string(c.shards)));
    EXPECT_FALSE(HasPrefix(args, "--gpus-per-node"));
    EXPECT_FALSE(HasPrefix(args, "--gres=gpu"));
  }
}

// Without the cluster's shards, or its GPU memory for a memory share, a share cannot be asked for;
// the error names the key to set.
TEST(ShapeForTest, AShareNeedsTheClustersShardsAndForMemoryItsGpuMemory) {
  study::SlurmSpec spec;
  Demand d;
  d.share = {0, 500};
  auto none = ShapeFor(spec, d);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("cluster.slurm.gpu_shards"));
  spec.gpu_shards = 4;
  EXPECT_TRUE(ShapeFor(spec, d).ok());
  d.share = {2048, 0};
  auto memory = ShapeFor(spec, d);
  ASSERT_FALSE(memory.ok());
  EXPECT_THAT(memory.status().message(), HasSubstr("cluster.slurm.gpu_memory"));
  spec.gpu_memory_mb = 1024;
  auto larger = ShapeFor(spec, d);
  ASSERT_FALSE(larger.ok());
  EXPECT_THAT(larger.status().message(), HasSubstr("more than a GPU's 1024 MiB"));
}

TEST(SbatchArgsTest, TimeIsWholeMinutesRoundedUp) {
  study::SlurmSpec spec;
  spec.time_limit_s = 90.5;
  EXPECT_TRUE(Has(SbatchArgs(spec, JobShape{}, JobTag{"s", 1, 1, 1}, "/l"), "--time=2"));
  spec.time_limit_s = 60;
  EXPECT_TRUE(Has(SbatchArgs(spec, JobShape{}, JobTag{"s", 1, 1, 1}, "/l"), "--time=1"));
  spec.time_limit_s = 5400;  // "1:30:00"
  EXPECT_TRUE(Has(SbatchArgs(spec, JobShape{}, JobTag{"s", 1, 1, 1}, "/l"), "--time=90"));
  spec.time_limit_s = 10;  // --time=0 would mean no limit
  EXPECT_TRUE(Has(SbatchArgs(spec, JobShape{}, JobTag{"s", 1, 1, 1}, "/l"), "--time=1"));
}

// ---- States ----

TEST(JobStateTest, ParsesFullNamesSuffixesAndCompactCodes) {
  EXPECT_EQ(ParseJobState("RUNNING"), JobState::kRunning);
  EXPECT_EQ(ParseJobState("CANCELLED by 1000"), JobState::kCancelled);
  EXPECT_EQ(ParseJobState("CANCELLED+"), JobState::kCancelled);
  EXPECT_EQ(ParseJobState("OUT_OF_MEMORY"), JobState::kOutOfMemory);
  EXPECT_EQ(ParseJobState("NODE_FAIL"), JobState::kNodeFail);
  EXPECT_EQ(ParseJobState("REQUEUE_HOLD"), JobState::kRequeued);
  EXPECT_EQ(ParseJobState("REQUEUE_FED"), JobState::kRequeued);
  EXPECT_EQ(ParseJobState("PD"), JobState::kPending);
  EXPECT_EQ(ParseJobState("R"), JobState::kRunning);
  EXPECT_EQ(ParseJobState("CA"), JobState::kCancelled);
  EXPECT_EQ(ParseJobState("TO"), JobState::kTimeout);
  EXPECT_EQ(ParseJobState("NF"), JobState::kNodeFail);
  EXPECT_EQ(ParseJobState("PR"), JobState::kPreempted);
  EXPECT_EQ(ParseJobState("OOM"), JobState::kOutOfMemory);
  EXPECT_EQ(ParseJobState("BF"), JobState::kBootFail);
  EXPECT_EQ(ParseJobState("DL"), JobState::kDeadline);
  EXPECT_EQ(ParseJobState("CG"), JobState::kCompleting);
  EXPECT_EQ(ParseJobState("CF"), JobState::kConfiguring);
  EXPECT_EQ(ParseJobState("S"), JobState::kSuspended);
  EXPECT_EQ(ParseJobState("RQ"), JobState::kRequeued);
  EXPECT_EQ(ParseJobState("CD"), JobState::kCompleted);
  EXPECT_EQ(ParseJobState("F"), JobState::kFailed);
}

TEST(JobStateTest, UnknownStatesAreUnknown) {
  EXPECT_EQ(ParseJobState("RESIZING"), JobState::kUnknown);
  EXPECT_EQ(ParseJobState(""), JobState::kUnknown);
  EXPECT_EQ(ParseJobState("RUNNINGX"), JobState::kUnknown);
}

TEST(JobStateTest, NamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(JobState::kDeadline); ++i) {
    auto s = static_cast<JobState>(i);
    EXPECT_EQ(ParseJobState(JobStateName(s)), s) << JobStateName(s);
  }
  EXPECT_STREQ(JobStateName(JobState::kOutOfMemory), "OUT_OF_MEMORY");
}

TEST(JobStateTest, OnlyStatesAJobNeverLeavesAreFinal) {
  for (JobState s : {JobState::kCompleted, JobState::kFailed, JobState::kCancelled,
                     JobState::kTimeout, JobState::kNodeFail, JobState::kPreempted,
                     JobState::kOutOfMemory, JobState::kBootFail, JobState::kDeadline})
    EXPECT_TRUE(IsFinal(s)) << JobStateName(s);
  for (JobState s :
       {JobState::kPending, JobState::kConfiguring, JobState::kRunning, JobState::kCompleting,
        JobState::kSuspended, JobState::kRequeued, JobState::kUnknown})
    EXPECT_FALSE(IsFinal(s)) << JobStateName(s);
}

// ---- squeue and sacct ----

TEST(ParseSqueueTest, ReadsRowsKeepingBarsInTheCommentAndSkippingMalformedLines) {
  const std::string text =
      "4711|hp:sweep:3|RUNNING|None|gpu[01-02]|hyperpack study=sweep trial=3 root=3 attempt=1\n"
      "4712|hp:sweep:4|PENDING|ReqNodeNotAvail, UnavailableNodes:gpu03|(null)|a|b||c\n"
      "garbage without bars\n"
      "4713|short|R|None\n"
      "\n"
      "4714|other|CANCELLED by 0|None||\r\n";
  std::vector<SqueueRow> rows = ParseSqueue(text);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].job_id, "4711");
  EXPECT_EQ(rows[0].name, "hp:sweep:3");
  EXPECT_EQ(rows[0].state, JobState::kRunning);
  EXPECT_EQ(rows[0].reason, "None");
  EXPECT_EQ(rows[0].nodelist, "gpu[01-02]");
  EXPECT_EQ(rows[0].comment, "hyperpack study=sweep trial=3 root=3 attempt=1");
  EXPECT_EQ(rows[1].job_id, "4712");
  EXPECT_EQ(rows[1].state, JobState::kPending);
  EXPECT_EQ(rows[1].reason, "ReqNodeNotAvail, UnavailableNodes:gpu03");
  EXPECT_EQ(rows[1].nodelist, "(null)");
  EXPECT_EQ(rows[1].comment, "a|b||c");
  EXPECT_EQ(rows[2].job_id, "4714");
  EXPECT_EQ(rows[2].state, JobState::kCancelled);
  EXPECT_EQ(rows[2].nodelist, "");
  EXPECT_EQ(rows[2].comment, "");
}

TEST(ParseSqueueTest, FormatIsTheOneTheParserReads) {
  EXPECT_STREQ(kSqueueFormat, "%i|%j|%T|%r|%N|%k");
  EXPECT_TRUE(ParseSqueue("").empty());
}

TEST(ParseSacctTest, ReadsParsable2Rows) {
  const std::string text =
      "4711|COMPLETED|0:0\n"
      "4712|FAILED|2:0\n"
      "4713|CANCELLED by 1000|0:15\n"
      "4714|OUT_OF_MEMORY|0:125\n"
      "bad line\n"
      "4715|TIMEOUT|0:0|extra\n";
  std::vector<SacctRow> rows = ParseSacct(text);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].job_id, "4711");
  EXPECT_EQ(rows[0].state, JobState::kCompleted);
  EXPECT_EQ(rows[0].exit_code, "0:0");
  EXPECT_EQ(rows[1].state, JobState::kFailed);
  EXPECT_EQ(rows[1].exit_code, "2:0");
  EXPECT_EQ(rows[2].job_id, "4713");
  EXPECT_EQ(rows[2].state, JobState::kCancelled);
  EXPECT_EQ(rows[2].exit_code, "0:15");
  EXPECT_EQ(rows[3].state, JobState::kOutOfMemory);
  EXPECT_STREQ(kSacctFormat, "JobID,State,ExitCode");
}

TEST(SacctSaysDisabledTest, RecognisesSlurmsMessageOnly) {
  EXPECT_TRUE(SacctSaysDisabled("Slurm accounting storage is disabled\n"));
  EXPECT_TRUE(SacctSaysDisabled("sacct: error: Slurm accounting storage is disabled"));
  EXPECT_FALSE(SacctSaysDisabled("4711|COMPLETED|0:0\n"));
  EXPECT_FALSE(SacctSaysDisabled(""));
  EXPECT_FALSE(SacctSaysDisabled("sacct: error: Problem talking to the database"));
}

// ---- Exits ----

TEST(DecodeExitCodeTest, ExitAndSignalHalves) {
  auto ok = DecodeExitCode("0:0");
  ASSERT_TRUE(ok);
  EXPECT_TRUE(Same(*ok, RankExit::Exited(0)));
  auto two = DecodeExitCode("2:0");
  ASSERT_TRUE(two);
  EXPECT_TRUE(Same(*two, RankExit::Exited(2)));
  auto killed = DecodeExitCode("0:9");
  ASSERT_TRUE(killed);
  EXPECT_TRUE(Same(*killed, RankExit::Signaled(9)));
}

TEST(DecodeExitCodeTest, MalformedIsNothing) {
  for (const char* bad : {"", "0", ":", "a:0", "0:b", "-1:0", "0:0:0", "1:"})
    EXPECT_FALSE(DecodeExitCode(bad).has_value()) << bad;
}

TEST(ExitForTest, EveryFinalStateMeansWhatTheHeaderSays) {
  const std::optional<RankExit> none;
  EXPECT_TRUE(Same(ExitFor(JobState::kCompleted, none), RankExit::Exited(0)));
  EXPECT_TRUE(Same(ExitFor(JobState::kCompleted, RankExit::Exited(0)), RankExit::Exited(0)));
  EXPECT_TRUE(Same(ExitFor(JobState::kFailed, none), RankExit::Exited(1)));
  EXPECT_TRUE(Same(ExitFor(JobState::kFailed, RankExit::Exited(3)), RankExit::Exited(3)));
  EXPECT_TRUE(Same(ExitFor(JobState::kFailed, RankExit::Signaled(6)), RankExit::Signaled(6)));
  EXPECT_TRUE(Same(ExitFor(JobState::kFailed, RankExit::Exited(0)), RankExit::Exited(1)));
  EXPECT_TRUE(Same(ExitFor(JobState::kCancelled, none), RankExit::Signaled(15)));
  EXPECT_TRUE(Same(ExitFor(JobState::kTimeout, none), RankExit::TimedOut()));
  EXPECT_TRUE(Same(ExitFor(JobState::kTimeout, RankExit::Exited(0)), RankExit::TimedOut()));
  EXPECT_TRUE(Same(ExitFor(JobState::kDeadline, none), RankExit::TimedOut()));
  EXPECT_TRUE(Same(ExitFor(JobState::kPreempted, none), RankExit::Preempted()));
  EXPECT_TRUE(Same(ExitFor(JobState::kNodeFail, none), RankExit::Lost()));
  EXPECT_TRUE(Same(ExitFor(JobState::kBootFail, none), RankExit::Lost()));
  EXPECT_TRUE(Same(ExitFor(JobState::kOutOfMemory, none), RankExit::Signaled(9)));
}

TEST(ExitForTest, SlurmsNoticeWinsOverTheScriptsOwnNonZeroEnd) {
  // The script exited 143 after its step was killed, before slurmctld recorded the preemption.
  const RankExit term = RankExit::Exited(143);
  EXPECT_TRUE(
      Same(ExitFor(JobState::kFailed, term, StepNotice::kPreemption), RankExit::Preempted()));
  EXPECT_TRUE(
      Same(ExitFor(JobState::kCompleted, term, StepNotice::kPreemption), RankExit::Preempted()));
  EXPECT_TRUE(Same(ExitFor(JobState::kCancelled, std::nullopt, StepNotice::kPreemption),
                   RankExit::Preempted()));
  EXPECT_TRUE(Same(ExitFor(JobState::kFailed, term, StepNotice::kTimeLimit), RankExit::TimedOut()));
  EXPECT_TRUE(Same(ExitFor(JobState::kFailed, term, StepNotice::kNodeFailure), RankExit::Lost()));
  EXPECT_TRUE(Same(ExitFor(JobState::kFailed, term, StepNotice::kRequeue), RankExit::Lost()));
  // Without a notice, or when the trial finished before the kill landed, the exit stands.
  EXPECT_TRUE(Same(ExitFor(JobState::kFailed, term, StepNotice::kNone), term));
  EXPECT_TRUE(Same(ExitFor(JobState::kCompleted, RankExit::Exited(0), StepNotice::kPreemption),
                   RankExit::Exited(0)));
  // Slurm's own final state is not second-guessed.
  EXPECT_TRUE(
      Same(ExitFor(JobState::kTimeout, term, StepNotice::kPreemption), RankExit::TimedOut()));
  EXPECT_TRUE(
      Same(ExitFor(JobState::kOutOfMemory, term, StepNotice::kPreemption), RankExit::Signaled(9)));
}

TEST(ParseStepNoticeTest, SlurmstepdsCancellationLines) {
  EXPECT_EQ(ParseStepNotice("slurmstepd-localhost: error: *** STEP 2.0 ON localhost CANCELLED AT "
                            "2026-11-25T01:02:57 DUE TO PREEMPTION ***"),
            StepNotice::kPreemption);
  EXPECT_EQ(ParseStepNotice("slurmstepd: error: *** JOB 7 ON gpu01 CANCELLED AT "
                            "2026-11-25T01:02:57 DUE TO TIME LIMIT ***"),
            StepNotice::kTimeLimit);
  EXPECT_EQ(
      ParseStepNotice("slurmstepd: error: *** JOB 7 ON gpu01 CANCELLED AT 2026-11-25T01:02:57 "
                      "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"),
      StepNotice::kNodeFailure);
  EXPECT_EQ(ParseStepNotice("slurmstepd: error: *** JOB 7 ON gpu01 CANCELLED AT "
                            "2026-11-25T01:02:57 DUE TO JOB REQUEUE ***"),
            StepNotice::kRequeue);
  // Older releases put the node last.
  EXPECT_EQ(ParseStepNotice("slurmstepd: *** JOB 7 CANCELLED AT 2016-01-01T00:00:00 DUE TO "
                            "PREEMPTION on gpu01 ***"),
            StepNotice::kPreemption);
}

TEST(ParseStepNoticeTest, OtherLinesAreNone) {
  for (const char* line :
       {"", "***", "loss 0.5",
        "slurmstepd: error: *** STEP 2.0 ON localhost CANCELLED AT "
        "2026-11-25T01:02:57 ***",  // scancel: the user's, no reason
        "DUE TO PREEMPTION", "*** TRIAL 3 CANCELLED AT noon DUE TO PREEMPTION ***",
        "*** JOB 7 FAILED (non-zero exit code or other failure mode) ***"})
    EXPECT_EQ(ParseStepNotice(line), StepNotice::kNone) << line;
}

// ---- Pending reasons and refusals ----

TEST(ClassifyPendingTest, ReasonsThatNeverClear) {
  for (const char* r :
       {"PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints",
        "InvalidAccount", "InvalidQOS", "AccountNotAllowed", "QOSNotAllowed"})
    EXPECT_EQ(ClassifyPending(r), PendingKind::kNeverClears) << r;
}

TEST(ClassifyPendingTest, ReqNodeNotAvailMayNotClear) {
  EXPECT_EQ(ClassifyPending("ReqNodeNotAvail"), PendingKind::kMayNotClear);
  EXPECT_EQ(ClassifyPending("ReqNodeNotAvail, UnavailableNodes:gpu[01-04]"),
            PendingKind::kMayNotClear);
  EXPECT_EQ(ClassifyPending("ReqNodeNotAvail, Reserved for maintenance"),
            PendingKind::kMayNotClear);
}

TEST(ClassifyPendingTest, EverythingElseWaits) {
  for (const char* r : {"Priority", "Resources", "None", "Dependency", "BeginTime", "JobHeldUser",
                        "JobHeldAdmin", "QOSMaxJobsPerUserLimit", "AssocGrpGRES", ""})
    EXPECT_EQ(ClassifyPending(r), PendingKind::kWaits) << r;
}

TEST(RefusalKeyTest, PointsSbatchsRealMessagesAtTheirKey) {
  EXPECT_EQ(RefusalKey("sbatch: error: invalid partition specified: nope"), "partition");
  EXPECT_EQ(RefusalKey("sbatch: error: Batch job submission failed: Invalid account or "
                       "account/partition combination specified"),
            "account");
  EXPECT_EQ(RefusalKey("sbatch: error: Batch job submission failed: Invalid qos specification"),
            "qos");
  EXPECT_EQ(RefusalKey("sbatch: error: Batch job submission failed: Requested node configuration "
                       "is not available"),
            "resources");
  EXPECT_EQ(RefusalKey("sbatch: error: Batch job submission failed: Invalid feature specification"),
            "constraint");
  EXPECT_EQ(RefusalKey("sbatch: error: Batch job submission failed: Requested time limit is "
                       "invalid (missing or exceeds some limit)"),
            "time_limit");
}

TEST(RefusalKeyTest, OtherErrorsAreNoKey) {
  EXPECT_EQ(RefusalKey("sbatch: error: Batch job submission failed: Socket timed out on send/recv "
                       "operation"),
            "");
  EXPECT_EQ(RefusalKey(""), "");
}

// ---- TorchrunFromSlurm ----

// Task 3 of a 2-node x 2-task job: node 1, local rank 1.
Env TwoByTwoTask3() {
  return {{"SLURM_PROCID", "3"},
          {"SLURM_NTASKS", "4"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_NODEID", "1"},
          {"SLURM_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_JOB_NODELIST", "gpu[07-08]"},
          {"SLURM_JOB_ID", "123456"}};
}

TEST(TorchrunFromSlurmTest, TwoNodesOfTwoTasks) {
  auto vars = TorchrunFromSlurm(TwoByTwoTask3());
  ASSERT_TRUE(vars.ok()) << vars.status().message();
  EXPECT_EQ(*vars, (Env{{env::kRank, "3"},
                        {env::kWorldSize, "4"},
                        {env::kLocalRank, "1"},
                        {env::kLocalWorldSize, "2"},
                        {env::kMasterAddr, "gpu07"},
                        {env::kMasterPort, "33456"}}));  // 10000 + 123456 % 50000
}

TEST(TorchrunFromSlurmTest, TasksOnThisNodeComeFromTheExpandedListAtNodeId) {
  Env e = TwoByTwoTask3();
  e["SLURM_TASKS_PER_NODE"] = "3(x2),1";
  e["SLURM_NTASKS"] = "7";
  e["SLURM_NODEID"] = "2";
  e["SLURM_LOCALID"] = "0";
  auto vars = TorchrunFromSlurm(e);
  ASSERT_TRUE(vars.ok()) << vars.status().message();
  EXPECT_EQ(vars->at(env::kLocalWorldSize), "1");
  e["SLURM_NODEID"] = "1";
  vars = TorchrunFromSlurm(e);
  ASSERT_TRUE(vars.ok());
  EXPECT_EQ(vars->at(env::kLocalWorldSize), "3");
}

TEST(TorchrunFromSlurmTest, NtasksPerNodeWinsOverTasksPerNode) {
  Env e = TwoByTwoTask3();
  e.insert_or_assign("SLURM_NTASKS_PER_NODE", "2");  // GCC 12 warns on operator= of "2"
  e["SLURM_TASKS_PER_NODE"] = "garbage";
  auto vars = TorchrunFromSlurm(e);
  ASSERT_TRUE(vars.ok()) << vars.status().message();
  EXPECT_EQ(vars->at(env::kLocalWorldSize), "2");
}

TEST(TorchrunFromSlurmTest, ARestartedJobResumes) {
  Env e = TwoByTwoTask3();
  e["SLURM_RESTART_COUNT"] = "0";
  auto first = TorchrunFromSlurm(e);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->count(env::kResume), 0u);
  e["SLURM_RESTART_COUNT"] = "2";
  auto again = TorchrunFromSlurm(e);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->at(env::kResume), "1");
}

TEST(TorchrunFromSlurmTest, APresetMasterPortIsLeftAlone) {
  Env e = TwoByTwoTask3();
  e[env::kMasterPort] = "29500";
  e.erase("SLURM_JOB_ID");  // not needed then
  auto vars = TorchrunFromSlurm(e);
  ASSERT_TRUE(vars.ok()) << vars.status().message();
  EXPECT_EQ(vars->count(env::kMasterPort), 0u);
}

TEST(TorchrunFromSlurmTest, MissingOrMalformedVariablesAreErrorsNamingThem) {
  Env e = TwoByTwoTask3();
  e.erase("SLURM_PROCID");
  auto missing = TorchrunFromSlurm(e);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("SLURM_PROCID"));

  e = TwoByTwoTask3();
  e["SLURM_NTASKS"] = "four";
  auto malformed = TorchrunFromSlurm(e);
  ASSERT_FALSE(malformed.ok());
  EXPECT_THAT(malformed.status().message(), HasSubstr("SLURM_NTASKS"));

  e = TwoByTwoTask3();
  e["SLURM_JOB_NODELIST"] = "gpu[07-";
  auto nodelist = TorchrunFromSlurm(e);
  ASSERT_FALSE(nodelist.ok());
  EXPECT_THAT(nodelist.status().message(), HasSubstr("SLURM_JOB_NODELIST"));

  e = TwoByTwoTask3();
  e["SLURM_NODEID"] = "2";  // only two nodes
  auto beyond = TorchrunFromSlurm(e);
  ASSERT_FALSE(beyond.ok());
  EXPECT_THAT(beyond.status().message(), HasSubstr("SLURM_NODEID"));
}

TEST(TorchrunFromSlurmTest, CudaVisibleDevicesNarrowsToThisTasksDevice) {
  Env e = TwoByTwoTask3();
  e[env::kCudaVisibleDevices] = "4,5";
  auto vars = TorchrunFromSlurm(e);
  ASSERT_TRUE(vars.ok());
  EXPECT_EQ(vars->at(env::kCudaVisibleDevices), "5");
}

TEST(TorchrunFromSlurmTest, CudaVisibleDevicesAlreadyPerTaskOrOfAnotherCountIsLeftOut) {
  Env e = TwoByTwoTask3();
  e[env::kCudaVisibleDevices] = "5";  // Slurm bound one GPU per task already
  auto one = TorchrunFromSlurm(e);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->count(env::kCudaVisibleDevices), 0u);
  e[env::kCudaVisibleDevices] = "0,1,2,3";
  auto other = TorchrunFromSlurm(e);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->count(env::kCudaVisibleDevices), 0u);
}

// ---- ShellQuote ----

TEST(ShellQuoteTest, SingleQuotesAndEscapesQuotesInside) {
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("a b $HOME"), "'a b $HOME'");
  EXPECT_EQ(ShellQuote(""), "''");
}

}  // namespace
}  // namespace hyperpack::scheduler::slurm
