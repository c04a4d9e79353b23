// Placement and the queue policies, on hand-worked examples.
#include "hyperpack/placement/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "hyperpack/placement/fair_share.h"
#include "hyperpack/placement/simulate.h"

namespace hyperpack::scheduler {
namespace {

std::vector<Node> GpuNodes(std::vector<int> gpus) {
  std::vector<Node> out;
  for (size_t i = 0; i < gpus.size(); ++i) out.push_back({"n" + std::to_string(i), gpus[i], 64});
  return out;
}

Demand Gpus(int n) { return Demand{n, 1, 1}; }

Job MakeJob(uint64_t id, int gpus, double submit, double estimate, int priority = 0) {
  Job j;
  j.id = id;
  j.demand = Gpus(gpus);
  j.submit = submit;
  j.estimate = estimate;
  j.priority = priority;
  return j;
}

TEST(ClusterStateTest, BestFitPicksTheTightestNodeAndKeepsLargeHolesFree) {
  ClusterState c(GpuNodes({8, 8, 8}));
  c.Allocate(*c.Find(Gpus(5), Fit::kBest));  // node 0 now has 3 free
  c.Allocate(*c.Find(Gpus(2), Fit::kBest));  // best fit: node 0 (3 free), not an empty node
  EXPECT_EQ(c.free_gpus(0), 1);
  EXPECT_EQ(c.free_gpus(1), 8);
  EXPECT_EQ(c.free_gpus(2), 8);
  // First fit also takes node 0 when it fits there...
  auto first = c.Find(Gpus(1), Fit::kFirst);
  EXPECT_EQ(first->ranks[0].node, 0);
  // ...but for 2 GPUs first fit takes node 1, and best fit does too (both empty nodes tie).
  EXPECT_EQ(c.Find(Gpus(2), Fit::kFirst)->ranks[0].node, 1);
}

TEST(ClusterStateTest, AGangStaysOnOneNodeWhenItCanAndGetsDistinctDevices) {
  ClusterState c(GpuNodes({4, 8}));
  auto p = c.Find(Gpus(6), Fit::kBest);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->ranks.size(), 6u);
  std::set<int> devices;
  for (const auto& r : p->ranks) {
    EXPECT_EQ(r.node, 1);
    ASSERT_EQ(r.gpus.size(), 1u);
    devices.insert(r.gpus[0]);
  }
  EXPECT_EQ(devices, (std::set<int>{0, 1, 2, 3, 4, 5}));
  c.Allocate(*p);
  EXPECT_EQ(c.free_gpus(1), 2);
  // The next gang gets the devices left: 6 and 7.
  auto q = c.Find(Gpus(2), Fit::kBest);
  EXPECT_EQ(q->ranks[0].node, 1);
  EXPECT_EQ(q->ranks[0].gpus[0], 6);
  EXPECT_EQ(q->ranks[1].gpus[0], 7);
  c.Release(*p);
  EXPECT_EQ(c.free_gpus(1), 8);
  EXPECT_EQ(c.total_free_gpus(), 12);
}

TEST(ClusterStateTest, SpansNodesOnlyWhenItMustAndThenUsesFewNodes) {
  ClusterState c(GpuNodes({8, 8, 8, 2}));
  c.Allocate(*c.Find(Gpus(3), Fit::kBest));  // somewhere: leaves 5 on one node
  auto p = c.Find(Gpus(13), Fit::kBest);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->ranks.size(), 13u);
  // 13 = 8 + 5: two nodes, the empty one first (rank 0, MASTER_ADDR), never the small node.
  auto nodes = p->Nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(c.free_gpus(nodes[0]), 8);
  for (int n : nodes) EXPECT_NE(n, 3);
  // Ranks on one node are consecutive.
  for (size_t r = 1; r < p->ranks.size(); ++r) {
    if (p->ranks[r].node != p->ranks[r - 1].node) {
      EXPECT_EQ(p->ranks[r].node, nodes[1]);
    }
  }
  EXPECT_FALSE(c.Find(Gpus(25), Fit::kBest));
  EXPECT_TRUE(c.Satisfiable(Gpus(26)));
  EXPECT_FALSE(c.Satisfiable(Gpus(27)));
}

TEST(ClusterStateTest, CpuOnlyGangsUseCpuSlots) {
  ClusterState c({{"laptop", 0, 2}});
  auto p = c.Find(Demand{2, 0, 1}, Fit::kBest);
  ASSERT_TRUE(p);
  c.Allocate(*p);
  EXPECT_EQ(c.free_cpus(0), 0);
  EXPECT_FALSE(c.Find(Demand{1, 0, 1}, Fit::kBest));
  EXPECT_FALSE(c.Satisfiable(Demand{3, 0, 1}));
}

TEST(SchedulerTest, FifoStopsAtTheFirstJobThatDoesNotFit) {
  ClusterState c(GpuNodes({8}));
  Scheduler s(&c, Policy::kFifo);
  ASSERT_TRUE(s.Submit(MakeJob(1, 6, 0, 100)).ok());
  ASSERT_TRUE(s.Submit(MakeJob(2, 4, 1, 100)).ok());
  ASSERT_TRUE(s.Submit(MakeJob(3, 1, 2, 10)).ok());
  auto started = s.Schedule(2);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].job.id, 1u);
  EXPECT_EQ(s.waiting(), 2u);  // job 3 would fit but waits behind job 2
}

TEST(SchedulerTest, BackfillRunsASmallJobThatEndsBeforeTheReservation) {
  // 8 GPUs; job 1 (6 GPUs) runs until t=100. Job 2 (4 GPUs) must wait for it: its reservation is
  // t=100. Job 3 (1 GPU, 10 s) fits now and ends at t=12, before the reservation: it backfills.
  // Job 4 (2 GPUs, 500 s) also fits now but would still run at t=100 on the reserved node.
  ClusterState c(GpuNodes({8}));
  Scheduler s(&c, Policy::kBestFit);
  ASSERT_TRUE(s.Submit(MakeJob(1, 6, 0, 100)).ok());
  ASSERT_EQ(s.Schedule(0).size(), 1u);
  ASSERT_TRUE(s.Submit(MakeJob(2, 4, 1, 100)).ok());
  ASSERT_TRUE(s.Submit(MakeJob(3, 1, 2, 10)).ok());
  ASSERT_TRUE(s.Submit(MakeJob(4, 2, 2, 500)).ok());
  auto started = s.Schedule(2);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].job.id, 3u);
  // When job 1 ends, the head starts first; job 4 only after it.
  s.Finish(3);
  s.Finish(1);
  started = s.Schedule(100);
  ASSERT_GE(started.size(), 1u);
  EXPECT_EQ(started[0].job.id, 2u);
}

TEST(SchedulerTest, BackfillUsesNodesTheReservationDoesNotNeed) {
  // Two nodes. The head (8 GPUs) waits for node 0; a long 2-GPU job may take node 1's gap but
  // never node 0's.
  ClusterState c(GpuNodes({8, 8}));
  Scheduler s(&c, Policy::kBestFit);
  ASSERT_TRUE(s.Submit(MakeJob(1, 4, 0, 100)).ok());   // node 0 (best fit on equal nodes: first)
  ASSERT_TRUE(s.Submit(MakeJob(2, 6, 0, 1000)).ok());  // node 1
  ASSERT_EQ(s.Schedule(0).size(), 2u);
  ASSERT_TRUE(s.Submit(MakeJob(3, 8, 1, 100)).ok());   // head: reserved on node 0 at t=100
  ASSERT_TRUE(s.Submit(MakeJob(4, 2, 2, 5000)).ok());  // fits on node 1 (2 free): allowed
  ASSERT_TRUE(s.Submit(MakeJob(5, 3, 3, 5000)).ok());  // fits only on node 0: would delay 3
  auto started = s.Schedule(3);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].job.id, 4u);
  EXPECT_EQ(started[0].placement.ranks[0].node, 1);
}

TEST(SchedulerTest, ALargeJobIsNotStarvedByAStreamOfSmallOnes) {
  ClusterState c(GpuNodes({8}));
  Scheduler s(&c, Policy::kBestFit);
  ASSERT_TRUE(s.Submit(MakeJob(1, 4, 0, 50)).ok());
  ASSERT_EQ(s.Schedule(0).size(), 1u);
  ASSERT_TRUE(s.Submit(MakeJob(2, 8, 1, 50)).ok());  // the large one
  // Small long jobs keep arriving; none may take the GPUs the large job is promised.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(s.Submit(MakeJob(10 + i, 1, 2 + i, 1000)).ok());
  auto started = s.Schedule(5);
  EXPECT_TRUE(started.empty());
  s.Finish(1);
  started = s.Schedule(50);
  ASSERT_FALSE(started.empty());
  EXPECT_EQ(started[0].job.id, 2u);
}

TEST(SchedulerTest, HigherPriorityGoesFirst) {
  ClusterState c(GpuNodes({2}));
  Scheduler s(&c, Policy::kBestFit);
  ASSERT_TRUE(s.Submit(MakeJob(1, 2, 0, 10)).ok());
  ASSERT_TRUE(s.Submit(MakeJob(2, 2, 5, 10, /*priority=*/1)).ok());  // a resumed trial
  auto started = s.Schedule(5);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].job.id, 2u);
}

TEST(SchedulerTest, RefusesADemandTheClusterCanNeverHold) {
  ClusterState c(GpuNodes({8, 8}));
  Scheduler s(&c, Policy::kBestFit);
  EXPECT_FALSE(s.Submit(MakeJob(1, 17, 0, 10)).ok());
  EXPECT_FALSE(s.Submit(Job{2, Demand{1, 9, 1}, 0, 0, 10}).ok());
  EXPECT_TRUE(s.Cancel(99) == false);
}

TEST(SimulationTest, AllJobsRunAndTheFiguresAreConsistent) {
  auto jobs = TuningWorkload(300, 7, 60);
  SimulationOptions o;
  o.nodes = 8;
  o.gpus_per_node = 8;
  for (Policy p : {Policy::kBestFit, Policy::kFirstFit, Policy::kFifo}) {
    o.policy = p;
    auto r = Simulate(jobs, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->jobs, 300);
    EXPECT_GE(r->makespan_ratio, 1.0 - 1e-9) << PolicyName(p);
    EXPECT_GT(r->gpu_utilisation, 0.0);
    EXPECT_LE(r->gpu_utilisation, 1.0 + 1e-9);
    EXPECT_GE(r->mean_jct, r->mean_queueing);
    EXPECT_GE(r->p95_queueing, 0.0);
  }
}

// What `hyperpack simulate` prints: the text names what ran on what, and the JSON carries the
// result's figures and the options that shaped them.
TEST(SimulationTest, TheTextAndTheJsonSayWhatRanAndWhatItGave) {
  SimulationOptions o;
  o.nodes = 2;
  o.gpus_per_node = 4;
  o.queue.order = Order::kShortestFirst;
  o.estimate_noise = 0.5;
  auto r = Simulate(TuningWorkload(40, 3, 60), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string text = SimulationText(*r, o);
  const std::string head = StrCat(r->jobs, " jobs on 2 nodes x 4 GPUs, ", PolicyName(o.policy),
                                  ", queue ", OrderName(o.queue.order));
  EXPECT_EQ(text.substr(0, head.size()), head) << text;
  EXPECT_NE(text.find("estimates off by a factor exp(N(0, 0.5))"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
  const nlohmann::json j = nlohmann::json::parse(SimulationJson(*r, o));
  EXPECT_EQ(j["jobs"], r->jobs);
  EXPECT_EQ(j["gpus"], 8);
  EXPECT_EQ(j["order"], OrderName(o.queue.order));
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), r->makespan);
  EXPECT_DOUBLE_EQ(j["estimate_noise"].get<double>(), 0.5);
}

// The bound counts the idle time that arrivals force: a cluster idle for most of 100 s, then given
// 16 whole-cluster jobs of 100 s, cannot end before 100 + 16 x 100 s, whatever the policy. The
// total work over the cluster alone (1601.25 s) would make every schedule look 6% long.
TEST(SimulationTest, TheMakespanBoundCountsTheIdleTimeThatArrivalsForce) {
  constexpr int kLate = 16;
  constexpr double kArrive = 100, kRun = 100;
  std::vector<TraceJob> jobs = {{0, 10, 1}};
  for (int i = 0; i < kLate; ++i) jobs.push_back({kArrive, kRun, 8});
  EXPECT_DOUBLE_EQ(MakespanLowerBound(jobs, 8), kArrive + kLate * kRun);
  SimulationOptions o;
  o.nodes = 1;
  o.gpus_per_node = 8;
  for (Policy p : {Policy::kBestFit, Policy::kFirstFit, Policy::kFifo}) {
    o.policy = p;
    auto r = Simulate(jobs, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_DOUBLE_EQ(r->makespan, kArrive + kLate * kRun) << PolicyName(p);
    EXPECT_DOUBLE_EQ(r->makespan_ratio, 1.0) << PolicyName(p);
  }
  // A job that runs longer than all the work after its submit sets the bound on its own.
  EXPECT_DOUBLE_EQ(MakespanLowerBound({{5, 10, 1}, {7, 1000, 1}}, 8), 1002);
  EXPECT_DOUBLE_EQ(MakespanLowerBound({}, 8), 0);
}

TEST(SimulationTest, BackfillBeatsFifoWhenLargeJobsBlockTheQueue) {
  // One 8-GPU node; a long 4-GPU job runs, an 8-GPU job waits, and many short 1-GPU jobs queue
  // behind it. FIFO makes them all wait; backfill runs them in the gap.
  std::vector<TraceJob> jobs = {{0, 1000, 4}, {1, 100, 8}};
  for (int i = 0; i < 20; ++i) jobs.push_back({2.0 + i, 50, 1});
  SimulationOptions o;
  o.nodes = 1;
  o.gpus_per_node = 8;
  o.policy = Policy::kFifo;
  auto fifo = Simulate(jobs, o).value();
  o.policy = Policy::kBestFit;
  auto backfill = Simulate(jobs, o).value();
  EXPECT_LT(backfill.mean_jct, 0.75 * fifo.mean_jct);
  EXPECT_LE(backfill.makespan, fifo.makespan);
}

// ---- The duration-aware queue -------------------------------------------------------------------

// Runs everything waiting on a one-GPU node, one job at a time, each for its estimate; returns the
// order the jobs started in.
std::vector<uint64_t> RunOneAtATime(Scheduler& s, double now) {
  std::vector<uint64_t> order;
  for (;;) {
    auto started = s.Schedule(now);
    if (started.empty()) return order;
    EXPECT_EQ(started.size(), 1u);
    order.push_back(started[0].job.id);
    now += started[0].job.estimate;
    s.Finish(started[0].job.id);
  }
}

TEST(SchedulerTest, ShortestFirstStartsTheShortestPredictedJobWhereArrivalOrderWouldNot) {
  // One GPU, busy until t=100. A (300 s) arrives at 1, B (10 s) at 2, C (50 s) at 3. By
  // estimate + submit: A 301, B 12, C 53.
  for (Order order : {Order::kArrival, Order::kShortestFirst}) {
    ClusterState c(GpuNodes({1}));
    Scheduler s(&c, Policy::kBestFit, {order, 1.0});
    ASSERT_TRUE(s.Submit(MakeJob(9, 1, 0, 100)).ok());
    ASSERT_EQ(s.Schedule(0).size(), 1u);
    ASSERT_TRUE(s.Submit(MakeJob(1, 1, 1, 300)).ok());
    ASSERT_TRUE(s.Submit(MakeJob(2, 1, 2, 10)).ok());
    ASSERT_TRUE(s.Submit(MakeJob(3, 1, 3, 50)).ok());
    s.Finish(9);
    const std::vector<uint64_t> expected =
        order == Order::kArrival ? std::vector<uint64_t>{1, 2, 3} : std::vector<uint64_t>{2, 3, 1};
    EXPECT_EQ(RunOneAtATime(s, 100), expected) << OrderName(order);
  }
}

// One GPU, busy until 200 with job 99. L (job 1000, 100 s) arrives at 0 and short jobs 1..15
// (5 s) at 10, 20, ..., 150; with `cancelled`, a 16th (at 160) is submitted and cancelled. The
// order the queue runs them in from 200, one at a time, and how many wait after.
struct LongAmongShort {
  std::vector<uint64_t> order;
  long long long_position = -1;  // where L ran
  size_t waiting_after = 0;
};
LongAmongShort RunLongAmongShort(const QueueOptions& q, bool cancelled = false) {
  ClusterState c(GpuNodes({1}));
  Scheduler s(&c, Policy::kBestFit, q);
  LongAmongShort out;
  EXPECT_TRUE(s.Submit(MakeJob(99, 1, 0, 200)).ok());
  EXPECT_EQ(s.Schedule(0).size(), 1u);
  EXPECT_TRUE(s.Submit(MakeJob(1000, 1, 0, 100)).ok());
  const int shorts = cancelled ? 16 : 15;
  for (int i = 1; i <= shorts; ++i) EXPECT_TRUE(s.Submit(MakeJob(i, 1, 10.0 * i, 5)).ok());
  if (cancelled) {
    EXPECT_TRUE(s.Cancel(16));
  }
  s.Finish(99);
  out.order = RunOneAtATime(s, 200);
  out.long_position = std::find(out.order.begin(), out.order.end(), 1000u) - out.order.begin();
  out.waiting_after = s.waiting();
  return out;
}

TEST(SchedulerTest, AgingLetsALongJobGoBeforeShortOnesThatArriveLongEnoughAfterIt) {
  // L (100 s) arrives at 0; short jobs (5 s) at 10, 20, ..., 150. With aging 1 a short job at t
  // ranks 5 + t against L's 100: those from 10 to 90 go first, those from 100 on after L. With
  // aging 0 (pure shortest first) L goes last.
  for (double aging : {1.0, 0.0}) {
    const LongAmongShort r = RunLongAmongShort({Order::kShortestFirst, aging});
    ASSERT_EQ(r.order.size(), 16u);
    EXPECT_EQ(r.long_position, aging > 0 ? 9 : 15) << "aging " << aging;
  }
}

TEST(SchedulerTest, AStarvationGuardSendsAJobThatWaitedMaxWaitToTheHead) {
  // Pure shortest first (aging 0) sends L (100 s, waiting since 0) after all fifteen 5 s jobs.
  // With max_wait 220 s the one GPU frees at 200 and runs short jobs until 220, when L has waited
  // 220 s and goes next, fifth. With max_wait 100 s, L (and the short jobs from 10 to 100) are
  // overdue at 200: L, the oldest, goes first, then the rest by arrival. A cancelled job leaves
  // the guard's bookkeeping too.
  for (double max_wait : {0.0, 220.0, 100.0}) {
    const LongAmongShort r =
        RunLongAmongShort({Order::kShortestFirst, 0.0, max_wait}, /*cancelled=*/true);
    ASSERT_EQ(r.order.size(), 16u);
    EXPECT_EQ(r.long_position, max_wait == 0     ? 15
                               : max_wait == 220 ? 4
                                                 : 0)
        << "max_wait " << max_wait;
    if (max_wait == 100) {
      std::vector<uint64_t> rest(r.order.begin() + 1, r.order.end());
      EXPECT_TRUE(std::is_sorted(rest.begin(), rest.end()));
    }
    EXPECT_EQ(r.waiting_after, 0u);
  }
}

TEST(SchedulerTest, AGuardInMultiplesOfTheTypicalEstimateFollowsTheEstimatesSubmitted) {
  // The estimates 200, 100 and fifteen of 5 s have a geometric mean of exp((log 200 + log 100 +
  // 15 log 5) / 17) = 7.41 s; 29.5 times that is 218.6 s: L, waiting since 0, is overdue at the
  // pass at 220 and goes fifth, as with max_wait 220 in AStarvationGuardSends... above.
  const LongAmongShort r = RunLongAmongShort({Order::kShortestFirst, 0.0, 0, 29.5});
  const double typical = std::exp((std::log(200.0) + std::log(100.0) + 15 * std::log(5.0)) / 17);
  ASSERT_GT(29.5 * typical, 215.0);
  ASSERT_LE(29.5 * typical, 220.0);
  EXPECT_EQ(r.long_position, 4);
}

// One 8-GPU node; L (1 GPU, 1000 s) and forty 100 s 1-GPU jobs, all at 0. Shortest first runs
// the forty in five rounds and L after them, ending at 1500. The forty and L take 5000 GPU-s, so
// all the work could be done by 625 s but L would still run to 1000 even if it started now: it
// is critical and starts at once, beside the first seven; the forty end by 600, and all at 1000.
TEST(SchedulerTest, CriticalFirstStartsAJobThatWouldEndLastEvenIfStartedNow) {
  constexpr uint64_t kLong = 1000;
  for (bool critical : {false, true}) {
    ClusterState c(GpuNodes({8}));
    QueueOptions q{Order::kShortestFirst, 0.0};
    q.critical_first = critical;
    Scheduler s(&c, Policy::kBestFit, q);
    ASSERT_TRUE(s.Submit(MakeJob(kLong, 1, 0, 1000)).ok());
    for (uint64_t i = 1; i <= 40; ++i) ASSERT_TRUE(s.Submit(MakeJob(i, 1, 0, 100)).ok());
    const auto started = s.Schedule(0);
    ASSERT_EQ(started.size(), 8u);
    const bool long_started = std::any_of(started.begin(), started.end(),
                                          [](const auto& st) { return st.job.id == kLong; });
    EXPECT_EQ(long_started, critical) << "critical_first " << critical;

    // The same on a machine of 8 CPU slots, trials holding one each: the slots are a pool of
    // their own.
    ClusterState cpus({{"laptop", 0, 8}});
    Scheduler on_cpus(&cpus, Policy::kBestFit, q);
    auto cpu_job = [](uint64_t id, double estimate) {
      Job j = MakeJob(id, 0, 0, estimate);
      j.demand = Demand{1, 0, 1};
      return j;
    };
    ASSERT_TRUE(on_cpus.Submit(cpu_job(kLong, 1000)).ok());
    for (uint64_t i = 1; i <= 40; ++i) ASSERT_TRUE(on_cpus.Submit(cpu_job(i, 100)).ok());
    const auto started_on_cpus = on_cpus.Schedule(0);
    ASSERT_EQ(started_on_cpus.size(), 8u);
    EXPECT_EQ(std::any_of(started_on_cpus.begin(), started_on_cpus.end(),
                          [](const auto& st) { return st.job.id == kLong; }),
              critical)
        << "on CPU slots, critical_first " << critical;

    std::vector<TraceJob> jobs = {{0, 1000, 1}};
    for (int i = 0; i < 40; ++i) jobs.push_back({0, 100, 1});
    SimulationOptions o;
    o.nodes = 1;
    o.gpus_per_node = 8;
    o.queue = q;
    auto r = Simulate(jobs, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_DOUBLE_EQ(r->makespan, critical ? 1000 : 1500) << "critical_first " << critical;
  }
}

TEST(SchedulerTest, BackfillTrustsOnlyTheCautiousEstimate) {
  // As in BackfillRunsASmallJobThatEndsBeforeTheReservation: the head is promised t=100. A
  // 1-GPU job predicted at 80 s ends in time; predicted at 80 s but possibly 120 s, it does not,
  // and on the one (reserved) node it must wait.
  for (double high : {0.0, 120.0}) {
    ClusterState c(GpuNodes({8}));
    Scheduler s(&c, Policy::kBestFit);
    ASSERT_TRUE(s.Submit(MakeJob(1, 6, 0, 100)).ok());
    ASSERT_EQ(s.Schedule(0).size(), 1u);
    ASSERT_TRUE(s.Submit(MakeJob(2, 4, 1, 100)).ok());
    Job j = MakeJob(3, 1, 2, 80);
    j.estimate_high = high;
    ASSERT_TRUE(s.Submit(j).ok());
    EXPECT_EQ(s.Schedule(2).size(), high > 0 ? 0u : 1u) << "estimate_high " << high;
  }
}

// The tuning workload's cluster: 8 nodes of 8 GPUs, the run times' estimates off by `noise`.
SimulationOptions EightByEight(double noise) {
  SimulationOptions o;
  o.nodes = 8;
  o.gpus_per_node = 8;
  o.estimate_noise = noise;
  return o;
}

TEST(SimulationTest, ShortestFirstLowersMeanCompletionTimeEvenWithWrongEstimates) {
  auto jobs = TuningWorkload(600, 3, 60);
  SimulationOptions o = EightByEight(0.5);
  o.noise_seed = 4;
  auto fifo = Simulate(jobs, o);
  ASSERT_TRUE(fifo.ok()) << fifo.status().message();
  o.queue = {Order::kShortestFirst, 1.0};
  auto sjf = Simulate(jobs, o);
  ASSERT_TRUE(sjf.ok()) << sjf.status().message();
  EXPECT_LT(sjf->mean_jct, 0.9 * fifo->mean_jct);
  EXPECT_EQ(sjf->jobs, 600);
  // The errors are drawn from the seed: the same seed, the same run.
  EXPECT_EQ(Simulate(jobs, o)->mean_jct, sjf->mean_jct);
  o.estimate_noise = -1;
  EXPECT_FALSE(Simulate(jobs, o).ok());
  EXPECT_FALSE(ParseOrder("lifo").ok());
  EXPECT_EQ(ParseOrder("sjf").value(), Order::kShortestFirst);
}

TEST(SimulationTest, TheRelativeGuardReachesTheQueueAndANegativeOneIsRefused) {
  // The guard in multiples of the typical estimate (hyperpack run's, 6x) changes which jobs go
  // first on a loaded cluster; whether it helps depends on the workload (docs/BENCHMARKS.md).
  auto jobs = TuningWorkload(600, 3, 60);
  SimulationOptions o = EightByEight(0.1);
  o.queue = {Order::kShortestFirst, 1.0};
  auto unguarded = Simulate(jobs, o);
  ASSERT_TRUE(unguarded.ok()) << unguarded.status().message();
  o.queue.max_wait_factor = 6;
  auto guarded = Simulate(jobs, o);
  ASSERT_TRUE(guarded.ok()) << guarded.status().message();
  EXPECT_NE(guarded->mean_jct, unguarded->mean_jct);
  EXPECT_EQ(guarded->jobs, 600);
  o.queue.max_wait_factor = -1;
  EXPECT_FALSE(Simulate(jobs, o).ok());
}

// ---- Fair share between studies (fair_share.h) --------------------------------------------------

TEST(FairShareTest, WaterFillingGivesTheSmallDemandAllItAsksAndSplitsTheRestByWeight) {
  // 10 units, weights 1, 1, 2: the first asks 2 of its 2.5 and gets them; the 8 left go 1:2 to
  // the others (2.67 and 5.33): whole shares 2 and 5, the last unit to the larger remainder.
  EXPECT_EQ(WeightedMaxMin(10, {1, 1, 2}, {2, 10, 10}), (std::vector<int>{2, 3, 5}));
  // Enough for everyone: each gets its demand, no more.
  EXPECT_EQ(WeightedMaxMin(10, {1, 5}, {3, 4}), (std::vector<int>{3, 4}));
  // No demand, no share; a remainder tie goes to the larger weight, then the earlier study.
  EXPECT_EQ(WeightedMaxMin(3, {1, 1, 1}, {0, 5, 5}), (std::vector<int>{0, 2, 1}));
  EXPECT_EQ(WeightedMaxMin(3, {1, 2}, {5, 5}), (std::vector<int>{1, 2}));
  EXPECT_EQ(WeightedMaxMin(0, {1, 1}, {5, 5}), (std::vector<int>{0, 0}));
}

// No unit of a node may be placed on by two studies: each sees its own and what it was given.
void ExpectDisjoint(const std::vector<Node>& nodes, const std::vector<ShareGrant>& grants) {
  for (size_t n = 0; n < nodes.size(); ++n) {
    const uint64_t all = (1ULL << nodes[n].gpus) - 1;
    uint64_t seen = 0;
    int cpus = 0;
    for (const ShareGrant& g : grants) {
      const uint64_t mine = all & ~g.withheld[n].gpus;
      EXPECT_EQ(seen & mine, 0u) << "node " << n;
      seen |= mine;
      cpus += nodes[n].cpus - g.withheld[n].cpus;
    }
    EXPECT_LE(cpus, nodes[n].cpus) << "node " << n;
  }
}

TEST(FairShareTest, ANewStudyIsGivenTheFreeGpusAndTheOneHoldingTooManyMustYield) {
  const std::vector<Node> nodes = {{"a", 4, 8}, {"b", 4, 8}};
  // A holds all of node a and wants 4 more; B, just started, wants 4.
  ShareClaim a{1, {{0xF, 4}, {0, 0}}, 4, 0, 4, 0};
  ShareClaim b{1, {}, 0, 0, 4, 0};
  std::vector<ShareGrant> even = DivideCapacity(nodes, {a, b});
  EXPECT_EQ(even[0].limit.gpus, 4);
  EXPECT_EQ(even[1].limit.gpus, 4);
  EXPECT_EQ(even[0].withheld[0], (NodeUnits{0, 4})) << "A keeps node a";
  EXPECT_EQ(even[0].withheld[1], (NodeUnits{0xF, 8}));
  EXPECT_EQ(even[1].withheld[0], (NodeUnits{0xF, 8}));
  EXPECT_EQ(even[1].withheld[1], (NodeUnits{0, 0})) << "B gets node b, its CPU slots with it";
  ExpectDisjoint(nodes, even);

  // Priority 3 against 1: 6 and 2 of the 8. Both are 2 short: the tie goes to the earlier study,
  // which takes the lowest two GPUs of node b, and B the other two.
  a.weight = 3;
  std::vector<ShareGrant> weighted = DivideCapacity(nodes, {a, b});
  EXPECT_EQ(weighted[0].limit.gpus, 6);
  EXPECT_EQ(weighted[1].limit.gpus, 2);
  EXPECT_EQ(weighted[0].withheld[1].gpus, 0xCu);
  EXPECT_EQ(weighted[1].withheld[1].gpus, 0x3u);
  ExpectDisjoint(nodes, weighted);

  // B claims nothing more: A may grow into all of it, and B is given nothing it would not use.
  b.wanted_gpus = 0;
  std::vector<ShareGrant> idle = DivideCapacity(nodes, {a, b});
  EXPECT_EQ(idle[0].limit.gpus, 8);
  EXPECT_EQ(idle[1].limit.gpus, 0);
  EXPECT_EQ(idle[1].withheld[1].gpus, 0xFu);
  ExpectDisjoint(nodes, idle);
}

TEST(FairShareTest, TwoGpuStudiesOnOneNodeSplitItsCpuSlotsByTheirGpus) {
  const std::vector<Node> nodes = {{"a", 4, 8}};
  ShareClaim a{1, {}, 0, 0, 3, 0};
  ShareClaim b{1, {}, 0, 0, 1, 0};
  std::vector<ShareGrant> g = DivideCapacity(nodes, {a, b});
  EXPECT_EQ(g[0].withheld[0], (NodeUnits{0x8, 2})) << "3 GPUs, and 6 of the 8 slots";
  EXPECT_EQ(g[1].withheld[0], (NodeUnits{0x7, 6})) << "1 GPU, and 2 slots";
  ExpectDisjoint(nodes, g);
}

TEST(FairShareTest, CpuSlotStudiesShareTheSlotsAndAStudyOverItsShareIsLimitedToIt) {
  const std::vector<Node> nodes = {{"c", 0, 4}};
  // A runs 4 trials that declare no CPU slots (each counts as one); B wants 2.
  ShareClaim a{1, {{0, 0}}, 0, 4, 0, 2};
  ShareClaim b{1, {}, 0, 0, 0, 2};
  std::vector<ShareGrant> g = DivideCapacity(nodes, {a, b});
  EXPECT_EQ(g[0].limit.slots, 2) << "A must come down from 4 to 2";
  EXPECT_EQ(g[1].limit.slots, 2);
  EXPECT_EQ(g[1].withheld[0].cpus, 2);
  ExpectDisjoint(nodes, g);
}

TEST(ClusterStateTest, WithheldUnitsAreNotPlacedOnAndComeBackWhenNoLongerWithheld) {
  ClusterState c({{"a", 4, 8}});
  c.Withhold(0, 0x3, 6);
  EXPECT_EQ(c.free_gpus(0), 2);
  EXPECT_EQ(c.free_cpus(0), 2);
  auto p = c.Find({1, 2, 1}, Fit::kBest);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->ranks[0].gpus, (std::vector<int>{2, 3})) << "GPUs 0 and 1 are withheld";
  c.Allocate(*p);
  EXPECT_EQ(c.held_gpu_mask(0), 0xCu);
  EXPECT_EQ(c.held_cpus(0), 1);
  // Withholding what is held is ignored; the earlier withholding is replaced, not added to.
  c.Withhold(0, 0xF, 8);
  EXPECT_EQ(c.free_gpus(0), 0);
  EXPECT_EQ(c.free_cpus(0), 0);
  EXPECT_EQ(c.held_gpu_mask(0), 0xCu);
  c.Withhold(0, 0, 0);
  EXPECT_EQ(c.free_gpus(0), 2);
  EXPECT_EQ(c.free_cpus(0), 7);
  c.Release(*p);
  EXPECT_EQ(c.free_gpus(0), 4);
  EXPECT_EQ(c.total_free_gpus(), 4);
}

TEST(SchedulerTest, ALimitHoldsJobsBackUntilWhatRunsIsUnderIt) {
  ClusterState c({{"a", 0, 8}});
  Scheduler s(&c, Policy::kBestFit);
  s.SetLimit({0, 2});
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(s.Submit({id, {1, 0, 0}, 0, 0, 0, 0}).ok());
  EXPECT_EQ(s.Schedule(0).size(), 2u) << "a job holding no CPU slot still counts as one";
  EXPECT_EQ(s.held_slots(), 2);
  EXPECT_EQ(s.waiting_slots(), 1);
  EXPECT_TRUE(s.Schedule(1).empty());
  s.SetLimit({0, 1});
  s.Finish(1);
  EXPECT_TRUE(s.Schedule(2).empty()) << "one runs, and the limit is one";
  s.Finish(2);
  EXPECT_EQ(s.Schedule(3).size(), 1u);
  EXPECT_EQ(s.held_slots(), 1);
  EXPECT_EQ(s.waiting_slots(), 0);
}

TEST(SchedulerTest, AGpuJobIsHeldByTheGpuLimitAloneAndCountsItsGpusWhileItWaits) {
  ClusterState c({{"a", 4, 8}});
  Scheduler s(&c, Policy::kBestFit);
  s.SetLimit({2, 0});                                      // no CPU slot for jobs without GPUs
  ASSERT_TRUE(s.Submit({1, {2, 1, 1}, 0, 0, 0, 0}).ok());  // 2 ranks of 1 GPU
  ASSERT_TRUE(s.Submit({2, {1, 1, 1}, 0, 0, 0, 0}).ok());
  ASSERT_TRUE(s.Submit({3, {1, 0, 2}, 0, 0, 0, 0}).ok());  // CPUs only
  EXPECT_EQ(s.waiting_gpus(), 3);
  EXPECT_EQ(s.waiting_slots(), 2);
  std::vector<Scheduler::Started> started = s.Schedule(0);
  ASSERT_EQ(started.size(), 1u) << "the GPU limit is 2 and the slot limit 0";
  EXPECT_EQ(started[0].job.id, 1u);
  EXPECT_EQ(s.held_gpus(), 2);
  EXPECT_EQ(s.held_slots(), 0) << "a GPU job's CPUs count against nothing";
  EXPECT_EQ(s.waiting_gpus(), 1);
  EXPECT_TRUE(s.Cancel(3));
  EXPECT_EQ(s.waiting_slots(), 0);
}

// ---- Shares of a GPU ----

std::vector<Node> GpuNodesWithMemory(std::vector<int> gpus, int64_t memory_mb, int cpus = 64) {
  std::vector<Node> out;
  for (size_t i = 0; i < gpus.size(); ++i)
    out.push_back({"n" + std::to_string(i), gpus[i], cpus, memory_mb});
  return out;
}

Demand Share(int64_t memory_mb, int milli = 0, int cpus = 1) {
  Demand d{1, 0, cpus};
  d.share = {memory_mb, milli};
  return d;
}

// Shares fill one GPU by memory before another is taken; a GPU holding a share is not free for a
// whole-GPU trial until its last share is released.
TEST(GpuShareTest, SharesFillOneGpuByMemoryBeforeTakingAnother) {
  ClusterState c(GpuNodesWithMemory({2}, 8192));
  std::vector<Placement> held;
  for (int i = 0; i < 4; ++i) {
    auto p = c.Find(Share(2048), Fit::kBest);
    ASSERT_TRUE(p) << i;
    EXPECT_EQ(p->ranks[0].gpus, std::vector<int>{0}) << i;
    c.Allocate(*p);
    held.push_back(*p);
  }
  EXPECT_EQ(c.sharers(0, 0), 4);
  EXPECT_EQ(c.shared_memory_mb(0, 0), 8192);
  EXPECT_EQ(c.free_gpus(0), 1);
  auto fifth = c.Find(Share(2048), Fit::kBest);
  ASSERT_TRUE(fifth);
  EXPECT_EQ(fifth->ranks[0].gpus, std::vector<int>{1}) << "GPU 0 is full";
  c.Allocate(*fifth);
  EXPECT_EQ(c.free_gpus(0), 0);
  EXPECT_FALSE(c.Find(Gpus(1), Fit::kBest)) << "both GPUs hold shares";
  c.Release(*fifth);
  auto whole = c.Find(Gpus(1), Fit::kBest);
  ASSERT_TRUE(whole) << "GPU 1's last share is gone";
  EXPECT_EQ(whole->ranks[0].gpus, std::vector<int>{1});
  for (const Placement& p : held) c.Release(p);
  EXPECT_EQ(c.free_gpus(0), 2);
  EXPECT_EQ(c.sharers(0, 0), 0);
  EXPECT_EQ(c.shared_memory_mb(0, 0), 0);
}

// Best fit puts a share on the shared GPU it leaves with the least memory; first fit on the
// first that holds it.
TEST(GpuShareTest, BestFitPacksOntoTheTightestSharedGpu) {
  ClusterState c(GpuNodesWithMemory({2}, 8192));
  Placement on0{{{0, {0}, 1, {6000, 0}}}}, on1{{{0, {1}, 1, {2000, 0}}}};
  c.Allocate(on0);
  c.Allocate(on1);
  EXPECT_EQ(c.Find(Share(2000), Fit::kBest)->ranks[0].gpus, std::vector<int>{0});
  EXPECT_EQ(c.Find(Share(3000), Fit::kBest)->ranks[0].gpus, std::vector<int>{1});
  EXPECT_EQ(c.Find(Share(1000), Fit::kFirst)->ranks[0].gpus, std::vector<int>{0});
  EXPECT_FALSE(c.Find(Share(6500), Fit::kBest)) << "no GPU has 6500 MiB left, none is free";
}

// Fractions need no memory figure: four quarters share a GPU whose memory is not known, a share
// by memory goes nowhere there, and a node with too little memory is passed over.
TEST(GpuShareTest, FractionsPackWithoutMemoryAndMemoryOnlyWhereItIsKnown) {
  ClusterState unknown(GpuNodes({1}));
  for (int i = 0; i < 4; ++i) {
    auto p = unknown.Find(Share(0, 250), Fit::kBest);
    ASSERT_TRUE(p) << i;
    unknown.Allocate(*p);
  }
  EXPECT_FALSE(unknown.Find(Share(0, 250), Fit::kBest)) << "four quarters fill it";
  EXPECT_FALSE(unknown.Satisfiable(Share(1024)));
  EXPECT_TRUE(unknown.Satisfiable(Share(0, 500)));
  EXPECT_FALSE(unknown.Satisfiable(Share(0, 1500)));

  std::vector<Node> mixed = {{"small", 1, 8, 16384}, {"large", 1, 8, 81920}};
  ClusterState c(mixed);
  auto p = c.Find(Share(20000), Fit::kBest);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->ranks[0].node, 1) << "only the 80 GiB GPU holds 20000 MiB";
  EXPECT_FALSE(c.Satisfiable(Share(90000)));
  Demand gang = Share(1024);
  gang.ranks = 2;
  EXPECT_FALSE(c.Satisfiable(gang)) << "a gang's ranks need GPUs of their own";
}

// Each share also holds its CPU slots: a node out of slots takes no more shares.
TEST(GpuShareTest, SharesHoldTheirCpuSlots) {
  EXPECT_TRUE(HeldOf(Share(1024)).gpus) << "charged as the GPU it is on";
  EXPECT_EQ(HeldOf(Share(1024, 0, 4)).units, 1);
  ClusterState c(GpuNodesWithMemory({1}, 81920, /*cpus=*/3));
  for (int i = 0; i < 3; ++i) c.Allocate(*c.Find(Share(1024), Fit::kBest));
  EXPECT_EQ(c.free_cpus(0), 0);
  EXPECT_FALSE(c.Find(Share(1024), Fit::kBest));
}

// Through the queue: eight 2 GiB trials on one 8 GiB GPU run four at a time, each next one as one
// ends; a share no node can hold is refused at submission, saying why.
TEST(GpuShareTest, TheSchedulerRunsAsManySharesAsTheGpuHolds) {
  ClusterState c(GpuNodesWithMemory({1}, 8192));
  Scheduler s(&c, Policy::kBestFit);
  for (uint64_t id = 1; id <= 8; ++id) {
    Job j;
    j.id = id;
    j.demand = Share(2048);
    j.submit = 0;
    j.estimate = 10;
    ASSERT_TRUE(s.Submit(j).ok());
  }
  auto first = s.Schedule(0);
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(s.waiting(), 4u);
  s.Finish(first[0].job.id);
  auto next = s.Schedule(10);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].placement.ranks[0].gpus, std::vector<int>{0});
  // Sized again while waiting (the packer learnt they need more): two of 3300 MiB fit where four
  // of 2048 did; a size no GPU holds is refused and leaves the job as it was.
  for (uint64_t id = 2; id <= 8; ++id) {
    if (id == next[0].job.id) continue;
    EXPECT_EQ(s.Resubmit(id, Share(3300)).ok(), id > 4) << id;
  }
  EXPECT_FALSE(s.Resubmit(8, Share(9000)).ok());
  for (const auto& started : first) s.Finish(started.job.id);
  s.Finish(next[0].job.id);
  EXPECT_EQ(s.Schedule(20).size(), 2u);
  Job big;
  big.id = 9;
  big.demand = Share(9000);
  Status refused = s.Submit(big);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("9000 MiB of one GPU"), std::string::npos) << refused.message();
}

}  // namespace
}  // namespace hyperpack::scheduler
