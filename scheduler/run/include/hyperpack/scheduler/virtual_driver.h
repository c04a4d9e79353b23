// The virtual-time driver of a StudyController: a study played on a simulated cluster, its trials
// simulated by a VirtualWorkload, the tuner called inline, time an event queue. A three-hour study
// takes a fraction of a second plus the tuner's own time, and every decision in it is the one the
// live runner would make: the benchmarks in bench/ measure the code that ships.
// Thread-safety: not thread-safe; one owner runs it on one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <vector>

#include "hyperpack/scheduler/study_controller.h"
#include "hyperpack/status.h"
#include "hyperpack/tuner/tuner.h"

namespace hyperpack::scheduler {

// What one launched trial does, a step at a time.
class VirtualTrial {
 public:
  virtual ~VirtualTrial() = default;
  struct Step {
    double after = 0;                // seconds after the previous step (or the launch)
    std::optional<MetricLine> line;  // rank 0 prints this, or
    std::optional<RankExit> exit;    // every rank ends so
  };
  virtual Step Next() = 0;
  // Told at its rung to go on to `target` (ContinueCmd): true when it does, and Next is asked
  // again; false, and it ends at its rung as its last step said.
  virtual bool Continue(double /*target*/) { return false; }
};

class VirtualWorkload {
 public:
  virtual ~VirtualWorkload() = default;
  // A trial's ranks start at `now` as the plan says.
  virtual std::unique_ptr<VirtualTrial> Start(const LaunchPlan& plan, double now) = 0;
  // Its ranks have all ended (by themselves or signalled).
  virtual void Ended(int trial, double now) {}
  // The tuner proposed `config` at `now`.
  virtual void Proposed(const Config& config, double now) {}
};

struct VirtualOptions {
  // Events past this time are not played (the run is cut off there).
  double horizon = std::numeric_limits<double>::infinity();
  bool checkpoints = true;  // a trial's checkpoint folder holds something once it has reported
};

class VirtualDriver {
 public:
  VirtualDriver(StudyController& controller, tuner::Tuner& tuner, VirtualWorkload& workload,
                VirtualOptions options = {});

  // Starts the controller on `stored` and plays events until it finishes or the horizon.
  // Errors: the controller's start failed.
  Status Run(const StoredStudy& stored);
  // Plays events until the controller finishes, the horizon, or virtual time `until`.
  void RunUntil(double until);
  // Hands the controller one event now (a test's Ctrl-C, a lost node) and performs its commands.
  void Inject(EventPayload event);

  double now() const { return now_; }
  double tuner_seconds() const { return tuner_s_; }
  const std::optional<RunSummary>& summary() const { return summary_; }
  // Every row the controller wrote, in order.
  const std::vector<Row>& rows() const { return rows_; }
  // Every outcome the tuner was taught, in order.
  const std::vector<tuner::TrialOutcome>& observed() const { return observed_; }

 private:
  struct Timed {
    double at;
    uint64_t seq;
    int trial;  // -1: a wake-up
    uint64_t generation;
    bool operator>(const Timed& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  struct Running {
    std::unique_ptr<VirtualTrial> sim;
    VirtualTrial::Step step;  // the next one
    int ranks = 1;
    uint64_t generation = 0;
    bool alive = true;
  };

  void Feed(EventPayload event);
  void Perform(std::vector<Command> commands);
  void Do(const Command& c);
  void Launch(const LaunchPlan& plan);
  void Schedule(int trial);
  void Stop(int trial, RankExit how);
  void Play(const Timed& t);

  StudyController& controller_;
  tuner::Tuner& tuner_;
  VirtualWorkload& workload_;
  VirtualOptions options_;
  double now_ = 0;
  double tuner_s_ = 0;
  uint64_t seq_ = 0;
  std::priority_queue<Timed, std::vector<Timed>, std::greater<Timed>> queue_;
  std::deque<EventPayload> inbox_;
  std::map<int, Running> running_;
  std::vector<Row> rows_;
  std::vector<tuner::TrialOutcome> observed_;
  std::optional<RunSummary> summary_;
};

}  // namespace hyperpack::scheduler
