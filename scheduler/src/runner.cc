#include "hyperpack/scheduler/runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include "executor.h"
#include "hyperpack/config_json.h"
#include "hyperpack/host.h"
#include "hyperpack/scheduler/metrics.h"
#include "hyperpack/scheduler/placement.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/template.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/pruner.h"
#include "hyperpack/tuner/tuner.h"
#include "process.h"
#include "storage_writer.h"
#include "study_run.h"

namespace hyperpack::scheduler {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using storage::Storage;
using storage::TrialRecord;
using storage::TrialState;
using study::StudySpec;
using Clock = std::chrono::steady_clock;

constexpr size_t kStderrTail = 4096;

// A trial paused at its rung (ASHA promote mode), waiting to be promoted.
struct Paused {
  int number = 0;
  Config config;
  int attempt = 1;
  std::optional<int> retry_of;
  int root = 0;
  double rung = 0;  // the resource it reached
  std::optional<double> value;
};

// A trial waiting to start: a new proposal, the re-run of an interrupted one, or a paused trial
// that was promoted.
struct Queued {
  Config config;
  int attempt = 1;
  std::optional<int> retry_of;
  std::optional<int> root;  // the first attempt's number: its checkpoint directory is shared
  // A promoted trial runs again under its own number, its value so far carried on (by
  // objective.strategy); if it never starts it is paused again, as it was.
  std::optional<Paused> promoted;
};

// One process of a trial's gang: its log and how it ended (the Executor runs it).
struct Rank {
  int index = 0;
  bool started = false;
  bool exited = false;
  bool lost = false;  // its node was lost
  int wait_status = 0;
  std::string err_tail;
  std::ofstream log;
};

// One running trial. Owned by the runner's map and by the handlers of its pending operations
// (shared_ptr), so that a late handler never touches freed memory; `done` makes it ignore them.
struct Trial {
  explicit Trial(asio::io_context& io) : timeout(io), kill(io) {}

  int number = 0;
  Config config;
  int attempt = 1;
  std::optional<int> retry_of;
  int root = 0;
  uint64_t job = 0;  // the scheduler's job: its placement is released when the trial ends
  Placement placement;
  double started_wall = 0;
  Clock::time_point started;
  std::vector<std::unique_ptr<Rank>> ranks;
  std::string log_path;  // rank 0's
  asio::steady_timer timeout, kill;
  bool timed_out = false, interrupted = false, done = false;
  int failed_rank = -1;  // the first rank that exited non-zero; the gang was stopped then
  std::optional<double> objective;
  int64_t metric_lines = 0;
  // Early stopping: the resource of the latest objective report, whether the pruner recorded a
  // rung with it (the tuner has learnt that value then), and the pruner's decision.
  int64_t reports = 0;
  double resource = 0;
  bool rung_observed = false;
  bool pruned = false, pausing = false;
  std::optional<double> resumed_to;  // a promoted trial: the resource it now trains to
  std::string prune_reason;
  Clock::time_point decided;

  bool AllExited() const {
    for (const auto& r : ranks)
      if (!r->exited) return false;
    return true;
  }
  // The rank whose ending says how the trial ended.
  const Rank& Deciding() const { return *ranks[failed_rank >= 0 ? failed_rank : 0]; }
};

std::string ParamsLine(const Config& config, const SearchSpace& space) {
  std::vector<std::string> parts;
  for (const ParamSpec& p : space.params()) {
    auto it = config.find(p.name);
    if (it != config.end() && p.type != ParamType::kFixed)
      parts.push_back(p.name + "=" + DisplayValue(it->second));
  }
  return Join(parts, " ");
}

std::string LastLines(const std::string& text, int lines) {
  size_t end = text.size();
  while (end > 0 && text[end - 1] == '\n') --end;
  size_t pos = end;
  for (int i = 0; i < lines && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
  }
  std::string out = text.substr(pos, end - pos);
  if (!out.empty() && out.front() == '\n') out.erase(0, 1);
  return out;
}

class Runner : public StudyRun {
 public:
  // On this machine: its own io_context, the local node, a LocalExecutor.
  Runner(const StudySpec& spec, const RunOptions& options)
      : Runner(spec, options, nullptr, {}, nullptr) {}

  // On `io` (run by someone else) with the given nodes and executor (hyperpack serve's agents).
  Runner(const StudySpec& spec, const RunOptions& options, asio::io_context* io,
         std::vector<ClusterNode> nodes, Executor* executor)
      : spec_(spec),
        options_(options),
        out_(options.out ? *options.out : std::cout),
        io_(io ? *io : own_io_),
        signals_(io_),
        ticker_(io_),
        time_limit_(io_) {
    max_trials_ = options.max_trials.value_or(spec.budget.max_trials);
    if (!io) {
      LocalNode local = options.node ? *options.node : DetectLocalNode();
      nodes.push_back(
          {{local.name, static_cast<int>(local.gpus.size()), local.cpus}, local.gpus, "127.0.0.1"});
    }
    std::vector<Node> cluster;
    for (const ClusterNode& n : nodes) {
      cluster.push_back(n.node);
      gpu_names_.push_back(n.gpu_names);
      node_addr_.push_back(n.address);
    }
    cluster_ = std::make_unique<ClusterState>(cluster);
    scheduler_ = std::make_unique<Scheduler>(cluster_.get(), Policy::kBestFit);
    Executor::Callbacks cb{
        [this](RankId id, bool is_err, const std::string& line) { OnLine(id, is_err, line); },
        [this](RankId id, int status) { OnExit(id, status); }};
    if (executor) {
      executor_ = executor;
      executor_->SetCallbacks(cb);
    } else {
      own_executor_ = MakeLocalExecutor(io_, cb);
      executor_ = own_executor_.get();
    }
    max_parallel_ = options.max_parallel.value_or(spec.budget.max_parallel);
  }

  // A node joined (an agent registered) while the study runs.
  void AddNode(const ClusterNode& n) override {
    cluster_->AddNode(n.node);
    gpu_names_.push_back(n.gpu_names);
    node_addr_.push_back(n.address);
    if (!done_) Fill();
  }
  // A node was lost: nothing more is placed there (its ranks are reported by the executor).
  void RemoveNode(int index) override { cluster_->RemoveNode(index); }
  // Stops the run as Ctrl-C would.
  void Interrupt() override { OnSignal(SIGTERM); }

  // Starts the run on io_; on_done is called on the io thread when it is over.
  Status Begin(std::function<void(Result<RunSummary>)> on_done) override {
    on_done_ = std::move(on_done);
    start_ = Clock::now();
    HP_RETURN_IF_ERROR(Prepare());
    summary_.study = spec_.name;
    if (options_.handle_signals) {
      signals_.add(SIGINT);
      signals_.add(SIGTERM);
      WaitSignal();
    }
    if (spec_.budget.time_limit_s) {
      time_limit_.expires_after(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(*spec_.budget.time_limit_s)));
      time_limit_.async_wait([this](boost::system::error_code ec) {
        if (ec || done_) return;
        StopLaunching("time limit");
        Event(std::nullopt, "time_limit",
              StrCat("time limit ", FormatDuration(*spec_.budget.time_limit_s),
                     " reached; waiting for ", running_.size(), " running trials"));
        MaybeFinish();
      });
    }
    if (options_.progress == RunOptions::Progress::kLine) Tick();
    asio::post(io_, [this] { Fill(); });
    return Status::Ok();
  }

  Result<RunSummary> Run() {
    HP_RETURN_IF_ERROR(Begin(nullptr));
    io_.run();
    return End();
  }

  // The run is over: record it and let go of the study.
  Result<RunSummary> End() {
    tuner_thread_.join();
    int64_t id = study_id_;
    std::string reason = summary_.stop_reason;
    double now = WallNow();
    writer_->Post([id, reason, now](Storage& db) {
      HP_RETURN_IF_ERROR(db.AddEvent(id, {now, std::nullopt, "run_stopped", reason}));
      return db.SetRunner(id, std::nullopt, "");
    });
    writer_->Close();
    if (!storage_error_.ok()) return storage_error_;
    ClearStatusLine();
    PrintSummary();
    return summary_;
  }

 private:
  // ---- setup --------------------------------------------------------------------------------
  Status Prepare() {
    fs::path db_path(options_.storage_path);
    if (db_path.has_parent_path()) {
      std::error_code ec;
      fs::create_directories(db_path.parent_path(), ec);
    }
    HP_ASSIGN_OR_RETURN(std::unique_ptr<Storage> db, Storage::Open(options_.storage_path));
    log_root_ = options_.log_dir.empty() ? fs::absolute(db_path).parent_path() / "hyperpack_logs"
                                         : fs::absolute(options_.log_dir);
    log_root_ /= spec_.name;

    HP_ASSIGN_OR_RETURN(auto warm, LoadWarmStart(*db));
    std::vector<TrialRecord> trials;
    Status claimed = db->Transaction([&]() -> Status {
      HP_ASSIGN_OR_RETURN(auto found, db->FindStudy(spec_.name));
      storage::StudyRecord study;
      if (!found) {
        study.name = spec_.name;
        study.spec_text = spec_.source_text;
        study.spec_path = spec_.source_path;
        study.direction = study::DirectionName(spec_.objective.direction);
        study.metric = spec_.objective.metric;
        study.seed = spec_.tuner.seed ? *spec_.tuner.seed : std::random_device{}() & 0x7fffffff;
        study.created = WallNow();
        HP_ASSIGN_OR_RETURN(study, db->CreateStudy(study));
        resumed_ = false;
      } else {
        study = *found;
        HP_RETURN_IF_ERROR(CheckCompatible(study));
        if (study.runner_pid && *study.runner_pid != getpid()) {
          if (study.runner_host != HostName())
            return Status::FailedPrecondition("study '", spec_.name, "' is being run by pid ",
                                              *study.runner_pid, " on ", study.runner_host,
                                              "; stop that runner first");
          if (ProcessAlive(*study.runner_pid))
            return Status::FailedPrecondition("study '", spec_.name, "' is already running (pid ",
                                              *study.runner_pid,
                                              "); follow it with: hyperpack status ", spec_.name);
        }
        resumed_ = true;
      }
      study_id_ = study.id;
      seed_ = study.seed;
      HP_RETURN_IF_ERROR(db->SetRunner(study.id, getpid(), HostName()));
      HP_ASSIGN_OR_RETURN(auto interrupted,
                          db->InterruptUnfinished(study.id, WallNow(),
                                                  "the runner stopped before the trial ended"));
      (void)interrupted;  // re-queued below from the trial list, with their attempts
      HP_ASSIGN_OR_RETURN(trials, db->ListTrials(study.id));
      HP_ASSIGN_OR_RETURN(next_number_, db->NextTrialNumber(study.id));
      return db->AddEvent(study.id,
                          {WallNow(), std::nullopt, resumed_ ? "run_resumed" : "run_started",
                           StrCat("pid ", getpid(), " on ", HostName())});
    });
    HP_RETURN_IF_ERROR(claimed);

    tuner::TunerOptions topts;
    topts.algorithm = spec_.tuner.algorithm;
    topts.seed = seed_;
    topts.maximize = spec_.objective.direction == study::Direction::kMaximize;
    topts.initial_trials = spec_.tuner.initial_trials;
    topts.acquisition = spec_.tuner.acquisition;
    HP_ASSIGN_OR_RETURN(tuner_, tuner::MakeTuner(spec_.space, topts));
    for (const tuner::TrialOutcome& o : warm) tuner_->Observe(o);
    tuner::PrunerOptions popts;
    popts.algorithm = spec_.pruner.algorithm;
    popts.min_resource = spec_.pruner.min_resource;
    popts.max_resource = spec_.pruner.max_resource;
    popts.reduction_factor = spec_.pruner.reduction_factor;
    popts.mode = spec_.pruner.mode;
    popts.warmup_steps = spec_.pruner.warmup_steps;
    popts.startup_trials = spec_.pruner.startup_trials;
    popts.maximize = topts.maximize;
    HP_ASSIGN_OR_RETURN(pruner_, tuner::MakePruner(popts));
    ladder_ = pruner_->Rungs();

    std::map<int, bool> has_retry;
    std::map<int, int> parent;
    for (const TrialRecord& t : trials)
      if (t.retry_of) {
        has_retry[*t.retry_of] = true;
        parent[t.number] = *t.retry_of;
      }
    auto root_of = [&](int n) {
      while (parent.count(n)) n = parent[n];
      return n;
    };
    for (const TrialRecord& t : trials) {
      auto config = ConfigFromJson(t.params_json);
      if (!config.ok()) return config.status().WithContext(StrCat("trial ", t.number));
      int root = root_of(t.number);
      // The pruner and the tuner see every report again, in order: rungs, pauses, promotions.
      HP_ASSIGN_OR_RETURN(Replayed r, Replay(*db, t, root, *config));
      bool rerun = (t.state == TrialState::kInterrupted || t.state == TrialState::kNodeLost) &&
                   !has_retry[t.number];
      if (storage::IsFinished(t.state)) {
        ++finished_;
        ObserveStored(t, *config, r);
      } else if (t.state == TrialState::kPaused || (rerun && r.paused && CheckpointExists(root))) {
        // A trial stopped at its rung when the runner died: it was pausing, and is paused now.
        if (t.state != TrialState::kPaused) {
          TrialRecord rec = t;
          rec.state = TrialState::kPaused;
          rec.error = "paused at its rung when the runner stopped";
          HP_RETURN_IF_ERROR(db->FinishTrial(rec));
        }
        paused_[root] = {t.number, *config, t.attempt, t.retry_of, root, r.resource, t.value};
      } else if (rerun) {
        retries_.push_back({*config, t.attempt + 1, t.number, root, std::nullopt});
      }
    }
    preparing_ = false;

    writer_ = std::make_unique<StorageWriter>(
        std::move(db), [this](Status s) { asio::post(io_, [this, s] { OnStorageError(s); }); });
    if (resumed_) {
      Print(StrCat(
          "resuming study '", spec_.name, "': ", finished_, " of ", max_trials_, " trials finished",
          retries_.empty() ? "" : StrCat(", ", retries_.size(), " interrupted to run again"),
          paused_.empty() ? "" : StrCat(", ", paused_.size(), " paused")));
    } else {
      Print(StrCat("study '", spec_.name, "': ", max_trials_, " trials, up to ", max_parallel_,
                   " at a time, ", spec_.objective.metric, " (",
                   study::DirectionName(spec_.objective.direction), "), tuner ",
                   spec_.tuner.algorithm, ", storage ", options_.storage_path, warm_note_));
    }
    return Status::Ok();
  }

  // Completed trials of another study that fit this space (tuner.warm_start), read before anything
  // is written so that a bad name changes nothing.
  Result<std::vector<tuner::TrialOutcome>> LoadWarmStart(Storage& db) {
    std::vector<tuner::TrialOutcome> out;
    if (spec_.tuner.warm_start.empty()) return out;
    const std::string& other = spec_.tuner.warm_start;
    if (other == spec_.name) return Status::Invalid("tuner.warm_start names this study itself");
    HP_ASSIGN_OR_RETURN(auto found, db.FindStudy(other));
    if (!found)
      return Status::NotFound("tuner.warm_start: no study named '", other, "' in ",
                              options_.storage_path);
    std::string direction = study::DirectionName(spec_.objective.direction);
    if (found->metric != spec_.objective.metric || found->direction != direction)
      return Status::Invalid("tuner.warm_start: study '", other, "' optimises ", found->direction,
                             " ", found->metric, ", this one ", direction, " ",
                             spec_.objective.metric);
    HP_ASSIGN_OR_RETURN(auto trials, db.ListTrials(found->id));
    int used = 0, skipped = 0;
    for (const TrialRecord& t : trials) {
      if (t.state != TrialState::kCompleted || !t.value) continue;
      auto config = ConfigFromJson(t.params_json);
      if (!config.ok() || !spec_.space.Validate(*config).ok()) {
        ++skipped;
        continue;
      }
      tuner::TrialOutcome o;
      o.config = *config;
      o.value = t.value;
      out.push_back(std::move(o));
      ++used;
    }
    warm_note_ = StrCat("; warm start from ", used, " trials of '", other, "'",
                        skipped ? StrCat(" (", skipped, " outside this space skipped)") : "");
    return out;
  }

  Status CheckCompatible(const storage::StudyRecord& study) {
    study::ParseOutcome stored = study::ParseStudy(study.spec_text, study.spec_path);
    if (!stored.spec) return Status::Ok();  // written by another version; trust the new file
    const StudySpec& old = *stored.spec;
    std::string hint = " than the stored study; give the study a new name to start afresh";
    if (old.space.Describe() != spec_.space.Describe())
      return Status::FailedPrecondition("study '", spec_.name, "' exists in ",
                                        options_.storage_path, " with a different search space",
                                        hint);
    if (old.objective.metric != spec_.objective.metric ||
        old.objective.direction != spec_.objective.direction)
      return Status::FailedPrecondition("study '", spec_.name, "' exists in ",
                                        options_.storage_path, " with a different objective", hint);
    return Status::Ok();
  }

  // What the replay of one trial's reports left behind.
  struct Replayed {
    int root = 0;
    bool paused = false;         // its last report paused it at a rung
    double resource = 0;         // of its last report
    bool rung_observed = false;  // the tuner learnt its last report as a rung's value
  };

  Result<Replayed> Replay(Storage& db, const TrialRecord& t, int root, const Config& config) {
    Replayed r;
    r.root = root;
    HP_ASSIGN_OR_RETURN(auto points, db.TrialMetrics(study_id_, t.number));
    std::stable_sort(points.begin(), points.end(),
                     [](const auto& a, const auto& b) { return a.step < b.step; });
    std::map<int64_t, double> epoch_at;
    for (const storage::MetricPoint& p : points)
      if (p.name == "epoch") epoch_at[p.step] = p.value;
    std::optional<double> objective;
    tuner::PrunerDecision last;
    for (const storage::MetricPoint& p : points) {
      if (p.name != spec_.objective.metric) continue;
      // Reporting past the rung it paused at: it had been promoted.
      if (last.kind == tuner::PrunerDecision::Kind::kPause) pruner_->Promoted(root);
      if (!reports_.count(root)) pruner_->Begin(root);
      int64_t count = ++reports_[root];
      objective = Combine(objective, p.value);
      auto e = epoch_at.find(p.step);
      r.resource = ResourceOf(
          p.step, e == epoch_at.end() ? std::nullopt : std::optional<int64_t>(e->second), count);
      last = pruner_->Report(root, r.resource, Comparable(*objective));
      r.rung_observed = ObserveRung(root, config, r.resource, *objective);
    }
    r.paused = last.kind == tuner::PrunerDecision::Kind::kPause;
    return r;
  }

  void ObserveStored(const TrialRecord& t, const Config& config, const Replayed& r) {
    tuner::TrialOutcome o;
    o.config = config;
    o.value = t.value;
    pruner_->End(r.root, t.state == TrialState::kCompleted);
    switch (t.state) {
      case TrialState::kCompleted:
        o.kind = tuner::TrialOutcome::Kind::kCompleted;
        ++summary_.completed;
        if (t.value && (!best_ || spec_.objective.Better(*t.value, *best_))) {
          best_ = t.value;
          best_trial_ = t.number;
        }
        break;
      case TrialState::kPruned:
        ++summary_.pruned;
        // Its rungs were learnt in the replay; a median-pruned value is learnt at its step.
        if (r.rung_observed || r.resource <= 0 || !t.value) return;
        o.kind = tuner::TrialOutcome::Kind::kPruned;
        o.resource = r.resource;
        break;
      case TrialState::kInfeasible:
        o.kind = tuner::TrialOutcome::Kind::kInfeasible;
        ++summary_.infeasible;
        break;
      default:
        o.kind = tuner::TrialOutcome::Kind::kFailed;
        ++summary_.failed;
        break;
    }
    tuner_->Observe(o);
  }

  // ---- scheduling -----------------------------------------------------------------------------
  int Busy() const { return static_cast<int>(running_.size() + waiting_.size()); }
  // Room for new trials. Paused trials count against the budget: they are configurations
  // started, and a promotion takes no more of it.
  int Free() const {
    int by_parallel = max_parallel_ - Busy();
    int by_budget = max_trials_ - finished_ - static_cast<int>(paused_.size()) - Busy();
    return std::max(0, std::min(by_parallel, by_budget));
  }

  // Re-runs and new proposals go to the scheduler's queue; Dispatch starts what fits.
  void Fill() {
    if (stopping_) return MaybeFinish();
    int free = Free();
    while (free > 0 && !retries_.empty()) {
      Enqueue(std::move(retries_.front()));
      retries_.pop_front();
      --free;
    }
    // Promotions need a slot, not budget; they go before new trials (ASHA's rule).
    if (pruner_->pauses()) {
      for (int slots = max_parallel_ - Busy(); slots > 0; --slots) {
        auto p = pruner_->NextPromotion();
        if (!p) break;
        auto it = paused_.find(p->trial);
        if (it == paused_.end()) {
          promoted_early_[p->trial] = p->target;  // still stopping; queued once it has
          continue;
        }
        Paused paused = std::move(it->second);
        paused_.erase(it);
        Promote(paused, p->target);
      }
      free = Free();
    }
    // New proposals only while nothing waits for room: a proposal made now is better informed
    // than one that would sit in the queue.
    if (free > 0 && !proposing_ && scheduler_->waiting() == 0) {
      // Proposing can take a while (fitting a GP): it runs on the tuner's thread, and the io
      // thread goes on reading metrics and reaping trials meanwhile.
      proposing_ = true;
      std::vector<Config> pending;
      for (const auto& [n, t] : running_) pending.push_back(t->config);
      for (const auto& [id, q] : waiting_) pending.push_back(q.config);
      asio::post(tuner_thread_, [this, free, pending = std::move(pending)] {
        auto proposals = tuner_->Propose(free, pending);
        asio::post(io_, [this, proposals = std::move(proposals)]() mutable {
          OnProposals(std::move(proposals));
        });
      });
    }
    Dispatch();
    MaybeFinish();
  }

  void OnProposals(Result<std::vector<Config>> proposals) {
    proposing_ = false;
    if (stopping_) return MaybeFinish();
    if (!proposals.ok()) {
      StopLaunching("tuner error");
      Print("tuner error: " + proposals.status().message());
      summary_.exit_code = 1;
      return MaybeFinish();
    }
    if (proposals->empty() && running_.empty() && retries_.empty() && waiting_.empty()) {
      StopLaunching("search space exhausted");
      Print("every configuration of the search space has been tried");
      return MaybeFinish();
    }
    // Slots may have been taken by re-runs meanwhile; extra proposals are dropped.
    int free = Free();
    for (Config& c : *proposals) {
      if (free-- <= 0) break;
      Enqueue({std::move(c), 1, std::nullopt, std::nullopt, std::nullopt});
    }
    Fill();
  }

  // What one trial needs: resources.gpus G makes a gang of G ranks with a GPU each (launched
  // with torchrun's variables); otherwise one process with resources.cpus CPU slots. Without
  // resources a trial takes no slot and only max_parallel bounds it.
  Result<Demand> DemandFor(const Config& config) const {
    Demand d{1, 0, 0};
    auto count = [&](const Expression& e, const char* key) -> Result<int> {
      HP_ASSIGN_OR_RETURN(double v, e.Evaluate(config));
      if (v < 0 || v != std::floor(v) || v > 1e6)
        return Status::Invalid("resources.", key, " = ", e.text(), " is ", FormatDouble(v),
                               "; expected a whole number >= 0");
      return static_cast<int>(v);
    };
    int gpus = 0;
    if (spec_.resources.gpus) {
      HP_ASSIGN_OR_RETURN(gpus, count(*spec_.resources.gpus, "gpus"));
      if (gpus > 0) d = Demand{gpus, 1, 0};
    }
    if (spec_.resources.cpus) {
      HP_ASSIGN_OR_RETURN(int cpus, count(*spec_.resources.cpus, "cpus"));
      d.cpus_per_rank = gpus > 0 ? (cpus + gpus - 1) / gpus : cpus;
    }
    return d;
  }

  void Enqueue(Queued q) {
    auto demand = DemandFor(q.config);
    Job job;
    job.id = ++jobs_;
    // Promotions, then re-runs, before new proposals.
    job.priority = q.promoted ? 2 : q.attempt > 1 ? 1 : 0;
    job.submit = std::chrono::duration<double>(Clock::now() - start_).count();
    job.estimate = EstimateSeconds();
    Status s = demand.ok() ? Status::Ok() : demand.status();
    if (demand.ok()) {
      job.demand = *demand;
      s = scheduler_->Submit(job);
    }
    if (!s.ok()) {
      // It can never run here: the tuner learns it as infeasible.
      NeverRuns(std::move(q), s.message());
      return;
    }
    waiting_.emplace(job.id, std::move(q));
  }

  // The median duration of this run's completed trials: the scheduler's estimate for backfill.
  double EstimateSeconds() const {
    if (durations_.empty()) return spec_.trial.timeout_s.value_or(0.0);
    std::vector<double> d = durations_;
    std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
    return d[d.size() / 2];
  }

  void Dispatch() {
    if (stopping_) return;
    double now = std::chrono::duration<double>(Clock::now() - start_).count();
    for (auto& started : scheduler_->Schedule(now)) {
      auto it = waiting_.find(started.job.id);
      Queued q = std::move(it->second);
      waiting_.erase(it);
      Launch(std::move(q), started.job.id, std::move(started.placement));
    }
  }

  // Observations reach the tuner on its own thread, in order, before any later Propose.
  void Observe(tuner::TrialOutcome o) {
    asio::post(tuner_thread_, [this, o = std::move(o)] { tuner_->Observe(o); });
  }

  void StopLaunching(const std::string& reason) {
    if (stopping_) return;
    stopping_ = true;
    summary_.stop_reason = reason;
    // Nothing that waits for room starts now (the run would otherwise wait for it for ever). A
    // promoted trial stays paused; new and re-run trials had no row yet.
    for (auto& [job, q] : waiting_) {
      scheduler_->Cancel(job);
      if (q.promoted) paused_[q.promoted->root] = std::move(*q.promoted);
    }
    waiting_.clear();
  }

  void MaybeFinish() {
    if (!running_.empty() || proposing_ || !waiting_.empty()) return;
    if (!stopping_ && Free() > 0) return;
    // The budget is spent with every trial stopped at a rung: the best of the highest rung
    // trains on to the end, so that the study has one fully trained configuration.
    if (!stopping_ && summary_.completed == 0 && !paused_.empty()) {
      if (auto p = pruner_->ForcePromotion(); p && paused_.count(p->trial)) {
        Paused paused = std::move(paused_[p->trial]);
        paused_.erase(p->trial);
        Print(StrCat("the budget is spent and no trial has completed: trial ", paused.number,
                     ", the best at the highest rung, trains to the end"));
        Promote(paused, p->target);
        return Dispatch();
      }
    }
    if (!stopping_) StopLaunching("budget reached");
    // Nothing runs, so no report can promote a paused trial any more. (Stopped for another
    // reason, paused trials stay paused and a resumed study may promote them.)
    if (summary_.stop_reason == "budget reached" ||
        summary_.stop_reason == "search space exhausted")
      FinalizePaused();
    // A handler already queued (say, a SIGCHLD that arrived just now) still runs after these
    // cancels; done_ keeps it from waiting again, so that io_context::run returns.
    done_ = true;
    signals_.cancel();
    if (own_executor_) own_executor_->Shutdown();
    ticker_.cancel();
    time_limit_.cancel();
    if (on_done_) asio::post(io_, [this] { on_done_(End()); });
  }

  void Launch(Queued q, uint64_t job, Placement placement) {
    auto t = std::make_shared<Trial>(io_);
    const bool resume = q.promoted.has_value();
    t->number = resume ? q.promoted->number : next_number_++;
    t->config = std::move(q.config);
    t->attempt = q.attempt;
    t->retry_of = q.retry_of;
    t->root = q.root.value_or(t->number);
    t->job = job;
    t->placement = std::move(placement);
    t->started_wall = WallNow();
    t->started = Clock::now();

    fs::path dir = TrialDir(t->number);
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::string params_json = ConfigToJson(t->config, &spec_.space);
    fs::path params_file = dir / "params.json";
    std::ofstream(params_file) << params_json << "\n";
    t->log_path = (dir / "output.log").string();

    std::map<std::string, std::string> builtins = {{"trial", std::to_string(t->number)},
                                                   {"study", spec_.name},
                                                   {"params_file", params_file.string()},
                                                   {"trial_dir", dir.string()}};
    std::string command = study::RenderTemplate(spec_.trial.command, t->config, builtins);
    std::map<std::string, std::string> env;
    for (const std::string& kv : CurrentEnvironment()) {
      auto eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const ParamSpec& p : spec_.space.params()) env.erase(study::ParamEnvName(p.name));
    for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                          "MASTER_PORT", "HYPERPACK_RESUME", "HYPERPACK_STOP_AT"})
      env.erase(v);
    // Python buffers a pipe's output until exit, which would hold back every metric line.
    env["PYTHONUNBUFFERED"] = "1";
    env["HYPERPACK_STUDY"] = spec_.name;
    env["HYPERPACK_TRIAL_ID"] = std::to_string(t->number);
    env["HYPERPACK_TRIAL_ATTEMPT"] = std::to_string(t->attempt);
    env["HYPERPACK_TRIAL_DIR"] = dir.string();
    env["HYPERPACK_PARAMS"] = params_json;
    env["HYPERPACK_PARAMS_FILE"] = params_file.string();
    // Every attempt of a trial shares the first one's checkpoints, and a re-run resumes from them.
    env["HYPERPACK_CHECKPOINT_DIR"] = (TrialDir(t->root) / "checkpoint").string();
    if (t->attempt > 1 || resume) env["HYPERPACK_RESUME"] = "1";
    // In promote mode a trial trains to its rung, checkpoints and exits (hyperpack-trainer reads
    // this; a command that does not is stopped when it reports the rung).
    double target = pruner_->Begin(t->root);
    if (resume) {
      t->resumed_to = target;
      t->objective = q.promoted->value;
    }
    if (pruner_->pauses() && spec_.pruner.resource == "epoch" && target < spec_.pruner.max_resource)
      env["HYPERPACK_STOP_AT"] = FormatShort(target, 12);
    for (const auto& [name, value] : t->config) env[study::ParamEnvName(name)] = FormatValue(value);
    for (const auto& [name, value] : spec_.trial.env)
      env[name] = study::RenderTemplate(value, t->config, builtins);

    // The gang: one process per rank, with torchrun's variables when the trial asked for GPUs.
    const int world = static_cast<int>(t->placement.ranks.size());
    const bool gang = !t->placement.ranks.empty() && !t->placement.ranks[0].gpus.empty();
    std::string port = std::to_string(FreeLoopbackPort());
    // LOCAL_RANK and LOCAL_WORLD_SIZE count the gang's ranks on each node.
    std::map<int, int> per_node, seen_on_node;
    for (const RankPlacement& rp : t->placement.ranks) per_node[rp.node]++;
    bool any_gpus = false;
    for (const auto& names : gpu_names_) any_gpus = any_gpus || !names.empty();
    std::vector<SpawnRequest> requests;
    for (int r = 0; r < std::max(1, world); ++r) {
      std::map<std::string, std::string> rank_env = env;
      int node = r < world ? t->placement.ranks[r].node : 0;
      if (gang) {
        rank_env["RANK"] = std::to_string(r);
        rank_env["LOCAL_RANK"] = std::to_string(seen_on_node[node]++);
        rank_env["WORLD_SIZE"] = std::to_string(world);
        rank_env["LOCAL_WORLD_SIZE"] = std::to_string(per_node[node]);
        rank_env["MASTER_ADDR"] = node_addr_[t->placement.ranks[0].node];
        rank_env["MASTER_PORT"] = port;
      }
      if (gang || any_gpus) {
        // A trial sees its own GPUs only (none when it asked for none).
        std::vector<std::string> ids;
        if (r < world)
          for (int g : t->placement.ranks[r].gpus) ids.push_back(gpu_names_[node][g]);
        rank_env["CUDA_VISIBLE_DEVICES"] = Join(ids, ",");
      }
      if (r < world && t->placement.ranks[r].cpus > 0)
        rank_env["HYPERPACK_CPUS"] = std::to_string(t->placement.ranks[r].cpus);
      SpawnRequest req;
      req.command = command;
      req.workdir = spec_.trial.workdir;
      for (const auto& [k, v] : rank_env) req.env.push_back(k + "=" + v);
      requests.push_back(std::move(req));
      auto rank = std::make_unique<Rank>();
      rank->index = r;
      std::string log = r == 0 ? t->log_path : (dir / StrCat("rank-", r, ".log")).string();
      rank->log.open(log, std::ios::app);
      rank->log << "# hyperpack trial " << t->number << " (attempt " << t->attempt << ")"
                << (gang ? StrCat(", rank ", r, " of ", world) : std::string())
                << "\n# command: " << command << "\n";
      t->ranks.push_back(std::move(rank));
    }

    TrialRecord rec;
    rec.study_id = study_id_;
    rec.number = t->number;
    rec.state = TrialState::kRunning;
    rec.params_json = params_json;
    rec.started = t->started_wall;
    rec.host = HostName();
    rec.attempt = t->attempt;
    rec.retry_of = t->retry_of;
    rec.log_path = t->log_path;

    // Persist, then act: the trial's row is committed before its process exists, so that storage
    // knows of every process a runner started (and a reader never sees a trial that is not there).
    running_[t->number] = t;
    std::string resumed_to =
        resume ? StrCat("to ", spec_.pruner.resource, " ", FormatShort(target, 6), " on ") : "on ";
    writer_->PostThen(
        [rec, resume, resumed_to](Storage& db) {
          if (resume) {
            HP_RETURN_IF_ERROR(db.ResumeTrial(rec.study_id, rec.number));
          } else {
            HP_RETURN_IF_ERROR(db.InsertTrial(rec));
          }
          return db.AddEvent(rec.study_id,
                             {rec.started.value_or(0), rec.number,
                              resume ? "trial_resumed" : "trial_started", resumed_to + rec.host});
        },
        [this, t, requests = std::move(requests)](const Status& s) {
          asio::post(io_, [this, t, requests, s] { Start(t, requests, s); });
        });
  }

  fs::path TrialDir(int number) const {
    char name[32];
    std::snprintf(name, sizeof(name), "trial-%04d", number);
    return log_root_ / name;
  }

  // A trial that cannot run on this cluster at all: recorded as infeasible without a process.
  void NeverRuns(Queued q, const std::string& why) {
    auto t = std::make_shared<Trial>(io_);
    t->number = next_number_++;
    t->config = std::move(q.config);
    t->attempt = q.attempt;
    t->retry_of = q.retry_of;
    t->root = q.root.value_or(t->number);
    t->started_wall = WallNow();
    t->started = Clock::now();
    auto rank = std::make_unique<Rank>();
    rank->exited = true;
    rank->err_tail = why;
    rank->wait_status = 3 << 8;
    t->ranks.push_back(std::move(rank));
    TrialRecord rec;
    rec.study_id = study_id_;
    rec.number = t->number;
    rec.state = TrialState::kRunning;
    rec.params_json = ConfigToJson(t->config, &spec_.space);
    rec.started = t->started_wall;
    rec.host = HostName();
    rec.attempt = t->attempt;
    rec.retry_of = t->retry_of;
    Post([rec](Storage& db) { return db.InsertTrial(rec); });
    running_[t->number] = t;
    Complete(t);
  }

  void Start(const std::shared_ptr<Trial>& t, const std::vector<SpawnRequest>& requests,
             const Status& stored) {
    auto never_ran = [&](const std::string& why) {
      for (auto& r : t->ranks) {
        if (r->started) continue;
        r->exited = true;
        r->wait_status = 127 << 8;
      }
      t->ranks[t->failed_rank >= 0 ? t->failed_rank : 0]->err_tail = why;
      if (t->AllExited()) {
        Complete(t);
      } else {
        Terminate(t);  // the ranks that did start end, and then the trial
      }
    };
    // Stopped (Ctrl-C, a storage error) while its row was being written: it never runs.
    if (t->interrupted) return never_ran("interrupted before it started");
    if (!stored.ok()) {
      t->interrupted = true;
      return never_ran(stored.message());
    }
    for (size_t r = 0; r < requests.size(); ++r) {
      int node = r < t->placement.ranks.size() ? t->placement.ranks[r].node : 0;
      Status s = executor_->Start({t->number, static_cast<int>(r)}, node, requests[r]);
      if (!s.ok()) {
        t->failed_rank = static_cast<int>(r);
        return never_ran(s.message());
      }
      t->ranks[r]->started = true;
    }
    std::string where;
    if (!t->placement.ranks.empty() && !t->placement.ranks[0].gpus.empty()) {
      std::vector<std::string> ids;
      for (const auto& r : t->placement.ranks)
        for (int g : r.gpus) ids.push_back(gpu_names_[r.node][g]);
      where = StrCat("  [", t->ranks.size(), " rank(s), GPUs ", Join(ids, ","), "]");
    }
    Event(t->number, "",
          t->resumed_to ? StrCat("resumed from its checkpoint to ", spec_.pruner.resource, " ",
                                 FormatShort(*t->resumed_to, 6), where)
                        : StrCat("started  ", ParamsLine(t->config, spec_.space), where),
          false);
    if (spec_.trial.timeout_s) {
      t->timeout.expires_after(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(*spec_.trial.timeout_s)));
      t->timeout.async_wait([this, t](boost::system::error_code ec) {
        if (ec || t->done || t->AllExited()) return;
        t->timed_out = true;
        Terminate(t);
      });
    }
  }

  // SIGTERM to every rank's process group, SIGKILL after the grace period.
  void Terminate(const std::shared_ptr<Trial>& t) {
    bool any = false;
    for (auto& r : t->ranks) {
      if (!r->started || r->exited) continue;
      executor_->Signal({t->number, r->index}, SIGTERM);
      any = true;
    }
    if (!any) return;
    t->kill.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(options_.kill_grace_s)));
    t->kill.async_wait([this, t](boost::system::error_code ec) {
      if (ec) return;
      for (auto& r : t->ranks)
        if (r->started && !r->exited) executor_->Signal({t->number, r->index}, SIGKILL);
    });
  }

  void OnLine(RankId id, bool is_err, const std::string& line) {
    auto it = running_.find(id.trial);
    if (it == running_.end()) return;
    Trial& t = *it->second;
    Rank& rank = *t.ranks[id.rank];
    rank.log << line << "\n";
    if (is_err) {
      rank.err_tail += line;
      rank.err_tail += '\n';
      if (rank.err_tail.size() > kStderrTail)
        rank.err_tail.erase(0, rank.err_tail.size() - kStderrTail);
      return;
    }
    if (rank.index != 0) return;  // rank 0's metrics are the trial's
    auto m = ParseMetricLine(line);
    if (!m) return;
    int64_t step = m->step.value_or(t.metric_lines);
    ++t.metric_lines;
    std::vector<storage::MetricPoint> points;
    double now = WallNow();
    bool reported = false;
    for (const auto& [name, value] : m->values) {
      // After a pruner's decision the trial's value stays the one it was judged on.
      if (name == spec_.objective.metric && !t.pruned && !t.pausing) {
        UpdateObjective(t, value);
        reported = true;
      }
      // SQLite stores NaN as NULL; a NaN point says nothing a chart could show.
      if (!std::isnan(value)) points.push_back({step, name, value, now});
    }
    // The epoch is kept too: a resumed study replays the pruner's resources from it.
    if (m->epoch && !points.empty())
      points.push_back({step, "epoch", static_cast<double>(*m->epoch), now});
    if (!points.empty()) {
      int64_t study = study_id_;
      int number = t.number;
      Post([study, number, points = std::move(points)](Storage& db) {
        return db.AddMetrics(study, number, points);
      });
    }
    if (reported) OnReport(it->second, *m);
  }

  void UpdateObjective(Trial& t, double v) { t.objective = Combine(t.objective, v); }

  // The trial's value after one more report, by objective.strategy.
  std::optional<double> Combine(std::optional<double> current, double v) const {
    using S = study::ObjectiveStrategy;
    S s = spec_.objective.strategy;
    if (s == S::kBest)
      s = spec_.objective.direction == study::Direction::kMinimize ? S::kMin : S::kMax;
    if (s == S::kLast || !current || std::isnan(*current)) return v;
    if (std::isnan(v)) return current;
    return s == S::kMin ? std::min(*current, v) : std::max(*current, v);
  }

  // ---- early stopping ---------------------------------------------------------------------------
  // NaN ranks last, whatever the direction.
  double Comparable(double v) const {
    if (!std::isnan(v)) return v;
    return spec_.objective.direction == study::Direction::kMinimize
               ? std::numeric_limits<double>::infinity()
               : -std::numeric_limits<double>::infinity();
  }

  // A report's progress: its epoch (or step), or else how many objective reports came so far.
  double ResourceOf(std::optional<int64_t> step, std::optional<int64_t> epoch,
                    int64_t count) const {
    std::optional<int64_t> r = spec_.pruner.resource == "step" ? step : epoch;
    return static_cast<double>(r.value_or(count));
  }

  // The tuner learns a trial's value at each level of the first bracket's ladder (min x eta^k,
  // below the full resource) that a report reaches, as a pruned outcome at that fidelity: in
  // Hyperband's later brackets too, whose own rungs start higher, so that the GP has the same
  // fidelities from every trial. True when it learnt this report.
  bool ObserveRung(int root, const Config& config, double resource, double value) {
    const std::vector<double>& ladder = ladder_;
    size_t& next = ladder_next_[root];
    std::optional<double> level;
    while (next < ladder.size() && resource + 1e-9 >= ladder[next]) level = ladder[next++];
    if (!level || *level >= spec_.pruner.max_resource * (1 - 1e-9) || !std::isfinite(value))
      return false;
    tuner::TrialOutcome o;
    o.config = config;
    o.kind = tuner::TrialOutcome::Kind::kPruned;
    o.value = value;
    o.resource = *level;
    Learn(std::move(o));
    return true;
  }

  // While preparing nothing else runs: the tuner is called directly, in order.
  void Learn(tuner::TrialOutcome o) {
    if (preparing_) {
      tuner_->Observe(o);
    } else {
      Observe(std::move(o));
    }
  }

  // A trial can pause only if its command checkpoints: something is in its checkpoint directory.
  bool CheckpointExists(int root) const {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(TrialDir(root) / "checkpoint", ec)) {
      (void)entry;
      return true;
    }
    return false;
  }

  // A report of the objective from rank 0: the pruner decides, and a trial it stops or pauses is
  // signalled at once (the decision lands well under a second after the line).
  void OnReport(const std::shared_ptr<Trial>& tp, const MetricLine& m) {
    Trial& t = *tp;
    if (t.pruned || t.pausing || !t.objective) return;
    int64_t count = ++reports_[t.root];
    t.resource = ResourceOf(m.step, m.epoch, count);
    tuner::PrunerDecision d = pruner_->Report(t.root, t.resource, Comparable(*t.objective));
    t.rung_observed = ObserveRung(t.root, t.config, t.resource, *t.objective);
    const std::string at = StrCat(spec_.pruner.resource, " ", FormatShort(t.resource, 6));
    if (d.kind == tuner::PrunerDecision::Kind::kPause && !CheckpointExists(t.root)) {
      d = pruner_->CannotPause(t.root);
      Event(t.number, "cannot_pause",
            StrCat("cannot pause at ", at, ": nothing in ",
                   (TrialDir(t.root) / "checkpoint").string(),
                   "; it runs on and is judged as in mode stop"));
    }
    if (d.kind != tuner::PrunerDecision::Kind::kContinue) {
      bool pause = d.kind == tuner::PrunerDecision::Kind::kPause;
      (pause ? t.pausing : t.pruned) = true;
      t.prune_reason = d.reason;
      t.decided = Clock::now();
      Event(t.number, pause ? "pausing" : "pruning",
            StrCat(pause ? "pausing" : "pruned", " at ", at, ": ", d.reason));
      Terminate(tp);
    }
    // A new value at a rung may let a paused trial be promoted into a free slot.
    if (d.rung && pruner_->pauses()) asio::post(io_, [this] { Fill(); });
  }

  // A paused trial goes back to the queue, ahead of new ones, to resume from its checkpoint.
  void Promote(const Paused& p, double target) {
    Event(p.number, "promoted",
          StrCat("promoted from ", spec_.pruner.resource, " ", FormatShort(p.rung, 6), " to ",
                 FormatShort(target, 6)));
    Enqueue({p.config, p.attempt, p.retry_of, p.root, p});
  }

  // The budget is spent and nothing runs: trials still paused will never be promoted.
  void FinalizePaused() {
    for (auto& [root, p] : paused_) {
      TrialRecord rec;
      rec.study_id = study_id_;
      rec.number = p.number;
      rec.state = TrialState::kPruned;
      rec.value = p.value;
      rec.ended = WallNow();
      rec.error = StrCat("paused at ", spec_.pruner.resource, " ", FormatShort(p.rung, 6),
                         " and not promoted before the study ended");
      Post([rec](Storage& db) {
        HP_RETURN_IF_ERROR(db.FinishTrial(rec));
        return db.AddEvent(rec.study_id, {*rec.ended, rec.number, "trial_finished", rec.error});
      });
      pruner_->End(root, false);
      ++finished_;
      ++summary_.pruned;
    }
    paused_.clear();
  }

  // ---- process exit --------------------------------------------------------------------------
  void OnExit(RankId id, int status) {
    auto it = running_.find(id.trial);
    if (it == running_.end()) return;
    std::shared_ptr<Trial> t = it->second;
    Rank& r = *t->ranks[id.rank];
    r.exited = true;
    r.lost = status == kLostStatus;
    r.wait_status = r.lost ? (1 << 8) : status;
    if (r.lost) r.err_tail = "its node was lost";
    bool ok = !r.lost && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && t->failed_rank < 0 && !t->AllExited()) {
      // One rank failed: the gang cannot finish without it.
      t->failed_rank = r.index;
      Terminate(t);
    }
    if (!t->AllExited()) return;
    t->timeout.cancel();
    t->kill.cancel();
    Complete(t);
  }

  void Complete(const std::shared_ptr<Trial>& t) {
    t->done = true;
    t->timeout.cancel();
    t->kill.cancel();
    running_.erase(t->number);
    if (t->job) scheduler_->Finish(t->job);
    double ended = WallNow();
    double elapsed = std::chrono::duration<double>(Clock::now() - t->started).count();

    TrialRecord rec;
    rec.study_id = study_id_;
    rec.number = t->number;
    rec.ended = ended;
    int code = -1;
    std::string how;
    const Rank& deciding = t->Deciding();
    std::string which = t->ranks.size() > 1 ? StrCat("rank ", deciding.index, ": ") : "";
    if (WIFEXITED(deciding.wait_status)) {
      code = WEXITSTATUS(deciding.wait_status);
      rec.exit_status = code;
      how = StrCat(which, "exit ", code);
      if (!deciding.started && t->job) how = "never started";
    } else if (WIFSIGNALED(deciding.wait_status)) {
      int sig = WTERMSIG(deciding.wait_status);
      rec.exit_status = 128 + sig;
      how = StrCat(which, "killed by signal ", sig, " (", strsignal(sig), ")");
    }
    std::string tail = LastLines(deciding.err_tail, 20);
    const std::string& metric = spec_.objective.metric;
    // A pruner's decision stands whatever happened after it (the signal it sent, a lost node).
    std::string stopped_after;
    if (t->pausing || t->pruned) {
      stopped_after = StrCat(
          "stopped ",
          FormatShort(1000 * std::chrono::duration<double>(Clock::now() - t->decided).count(), 3),
          " ms after the deciding report");
      how = t->pausing ? "paused" : "pruned";
    }
    if (t->pausing) {
      rec.state = TrialState::kPaused;
      rec.error = t->prune_reason;
    } else if (t->pruned) {
      rec.state = TrialState::kPruned;
      rec.error = t->prune_reason;
    } else if (deciding.lost && !t->interrupted) {
      bool again = t->attempt < spec_.budget.max_attempts;
      rec.state = again ? TrialState::kNodeLost : TrialState::kFailed;
      rec.error = again ? StrCat("node lost; it runs again (attempt ", t->attempt + 1, " of ",
                                 spec_.budget.max_attempts, ")")
                        : StrCat("node lost on each of its ", t->attempt, " attempts");
      how = "node lost";
    } else if (t->interrupted) {
      rec.state = TrialState::kInterrupted;
      rec.error = "interrupted (Ctrl-C or SIGTERM); it runs again when the study is resumed";
    } else if (t->timed_out) {
      rec.state = TrialState::kTimeout;
      rec.error = StrCat("killed after the timeout of ", FormatDuration(*spec_.trial.timeout_s));
    } else if (code == 0 && t->objective && std::isfinite(*t->objective)) {
      rec.state = TrialState::kCompleted;
      rec.value = t->objective;
    } else if (code == 0) {
      rec.state = TrialState::kFailed;
      rec.error = t->objective
                      ? StrCat("the objective ", metric, " is ", FormatDouble(*t->objective))
                      : StrCat("exited 0 but never reported '", metric,
                               "'; print a line such as {\"", metric, "\": 0.9}");
    } else if (code == 3) {
      rec.state = TrialState::kInfeasible;
      rec.error = tail.empty() ? "exit 3: this configuration cannot run" : tail;
    } else {
      rec.state = TrialState::kFailed;
      rec.error = tail.empty() ? how : StrCat(how, ": ", tail);
    }
    if (t->objective && rec.state != TrialState::kCompleted && std::isfinite(*t->objective))
      rec.value = t->objective;
    for (auto& r : t->ranks) {
      if (!r->log.is_open()) continue;
      r->log << "# trial " << t->number << " " << storage::TrialStateName(rec.state) << " (" << how
             << ") after " << FormatDuration(elapsed) << "\n";
      r->log.close();
    }
    if (rec.state == TrialState::kCompleted) durations_.push_back(elapsed);
    Post([rec, stopped_after](Storage& db) {
      HP_RETURN_IF_ERROR(db.FinishTrial(rec));
      return db.AddEvent(rec.study_id,
                         {*rec.ended, rec.number,
                          rec.state == TrialState::kPaused ? "trial_paused" : "trial_finished",
                          StrCat(storage::TrialStateName(rec.state),
                                 rec.value ? " " + FormatDouble(*rec.value) : "",
                                 stopped_after.empty() ? "" : "; " + stopped_after)});
    });

    // Learn, count, tell.
    std::string line;
    if (rec.state == TrialState::kInterrupted) {
      ++summary_.interrupted;
      retries_.push_back({t->config, t->attempt + 1, t->number, t->root, std::nullopt});
      line = "interrupted";
    } else if (rec.state == TrialState::kNodeLost) {
      // Requeued at once, ahead of new proposals, to resume from its checkpoints.
      retries_.push_back({t->config, t->attempt + 1, t->number, t->root, std::nullopt});
      line = "lost with its node; requeued";
    } else if (rec.state == TrialState::kPaused) {
      Paused p{t->number, t->config, t->attempt, t->retry_of, t->root, t->resource, rec.value};
      line = StrCat("paused at ", spec_.pruner.resource, " ", FormatShort(t->resource, 6), "  ",
                    metric, "=", rec.value ? FormatShort(*rec.value, 6) : "?", "  (", stopped_after,
                    ")");
      // Promoted while it was still stopping: it goes straight back to the queue.
      if (promoted_early_.count(t->root)) {
        double target = promoted_early_[t->root];
        promoted_early_.erase(t->root);
        Promote(p, target);
      } else {
        paused_[t->root] = std::move(p);
      }
    } else {
      ++finished_;
      pruner_->End(t->root, rec.state == TrialState::kCompleted);
      tuner::TrialOutcome o;
      o.config = t->config;
      o.value = rec.value;
      bool learn = true;
      switch (rec.state) {
        case TrialState::kPruned:
          o.kind = tuner::TrialOutcome::Kind::kPruned;
          o.resource = t->resource;
          // Its value at the rung that stopped it is learnt already.
          learn = !t->rung_observed && rec.value.has_value();
          ++summary_.pruned;
          line = StrCat("pruned at ", spec_.pruner.resource, " ", FormatShort(t->resource, 6), "  ",
                        metric, "=", rec.value ? FormatShort(*rec.value, 6) : "?", "  (",
                        stopped_after, ")");
          break;
        case TrialState::kCompleted: {
          o.kind = tuner::TrialOutcome::Kind::kCompleted;
          ++summary_.completed;
          bool is_best = !best_ || spec_.objective.Better(*rec.value, *best_);
          if (is_best) {
            best_ = rec.value;
            best_trial_ = t->number;
          }
          line = StrCat("completed  ", metric, "=", FormatShort(*rec.value, 6),
                        is_best ? "  (best so far)" : "");
          break;
        }
        case TrialState::kInfeasible:
          o.kind = tuner::TrialOutcome::Kind::kInfeasible;
          ++summary_.infeasible;
          line = "infeasible (exit 3)";
          break;
        default:
          o.kind = tuner::TrialOutcome::Kind::kFailed;
          ++summary_.failed;
          ++failed_this_run_;
          line =
              StrCat(storage::TrialStateName(rec.state), " (", how, "): ", LastLines(rec.error, 1));
          break;
      }
      if (learn) Observe(std::move(o));
    }
    Event(t->number, "", StrCat(line, "  [", FormatDuration(elapsed), "]"), false);
    if (failed_this_run_ >= spec_.budget.max_failed && !stopping_) {
      StopLaunching("too many failed trials");
      summary_.exit_code = 1;
      Print(StrCat("stopping: ", failed_this_run_,
                   " trials failed in this run (budget.max_failed = ", spec_.budget.max_failed,
                   "); see the logs under ", log_root_.string()));
    }
    // Posted, not called: a trial that could not even start completes inside Launch, and Fill's
    // own loop must not be re-entered.
    asio::post(io_, [this] { Fill(); });
  }

  // ---- interruption and errors ----------------------------------------------------------------
  void WaitSignal() {
    signals_.async_wait([this](boost::system::error_code ec, int sig) {
      if (ec || done_) return;
      OnSignal(sig);
      if (!done_) WaitSignal();
    });
  }

  void OnSignal(int sig) {
    if (done_) return;
    if (interrupt_count_++ == 0) {
      StopLaunching("interrupted");
      summary_.exit_code = 130;
      Print(StrCat("\n", sig == SIGINT ? "Ctrl-C" : "SIGTERM", ": stopping ", running_.size(),
                   " running trials (again to kill them at once); resume with the same command"));
      for (auto& [n, t] : running_) {
        t->interrupted = true;
        Terminate(t);
      }
      for (auto& [job, q] : waiting_) scheduler_->Cancel(job);
      waiting_.clear();
    } else {
      for (auto& [n, t] : running_)
        for (auto& r : t->ranks)
          if (r->started && !r->exited) executor_->Signal({t->number, r->index}, SIGKILL);
    }
    MaybeFinish();
  }

  void OnStorageError(const Status& s) {
    if (!storage_error_.ok()) return;
    storage_error_ = s;
    Print("storage error: " + s.message() + "; stopping the study");
    StopLaunching("storage error");
    summary_.exit_code = 1;
    for (auto& [n, t] : running_) {
      t->interrupted = true;
      Terminate(t);
    }
    MaybeFinish();
  }

  void Post(StorageWriter::Op op) { writer_->Post(std::move(op)); }

  void Event(std::optional<int> trial, const std::string& kind, const std::string& text,
             bool store = true) {
    if (store) {
      int64_t id = study_id_;
      double now = WallNow();
      Post([id, trial, kind, text, now](Storage& db) {
        return db.AddEvent(id, {now, trial, kind, text});
      });
    }
    Print(trial ? StrCat("trial ", *trial, " ", text) : text);
  }

  // ---- what people see -----------------------------------------------------------------------
  std::string Elapsed() const {
    auto s = static_cast<int64_t>(std::chrono::duration<double>(Clock::now() - start_).count());
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
    return buf;
  }

  std::string StatusLine() const {
    std::string best = best_ ? StrCat("best ", spec_.objective.metric, " ", FormatShort(*best_, 5),
                                      " (trial ", *best_trial_, ")")
                             : "no result yet";
    return StrCat("[", Elapsed(), "] ", finished_, "/", max_trials_, " done (", summary_.completed,
                  " ok, ", summary_.failed + summary_.infeasible, " failed), ", running_.size(),
                  " running, ", best);
  }

  void Print(const std::string& text) {
    if (options_.on_progress) {
      options_.on_progress(StrCat("[", Elapsed(), "] ", text));
      return;
    }
    if (options_.progress == RunOptions::Progress::kQuiet) return;
    if (options_.progress == RunOptions::Progress::kLine) {
      out_ << "\r\033[K[" << Elapsed() << "] " << text << "\n" << StatusLine() << std::flush;
      line_shown_ = true;
      return;
    }
    out_ << "[" << Elapsed() << "] " << text << std::endl;
  }

  void ClearStatusLine() {
    if (line_shown_) out_ << "\r\033[K" << std::flush;
    line_shown_ = false;
  }

  void Tick() {
    out_ << "\r\033[K" << StatusLine() << std::flush;
    line_shown_ = true;
    ticker_.expires_after(std::chrono::seconds(1));
    ticker_.async_wait([this](boost::system::error_code ec) {
      if (!ec && !done_) Tick();
    });
  }

  void PrintSummary() {
    summary_.total_finished = finished_;
    summary_.best_value = best_;
    summary_.best_trial = best_trial_;
    double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    std::ostringstream text;
    text << "study '" << spec_.name << "' " << summary_.stop_reason << " after "
         << FormatDuration(secs) << ": " << finished_ << "/" << max_trials_ << " trials finished ("
         << summary_.completed << " completed, "
         << (summary_.pruned ? StrCat(summary_.pruned, " pruned, ") : std::string())
         << summary_.failed << " failed, " << summary_.infeasible << " infeasible)";
    if (!paused_.empty()) text << ", " << paused_.size() << " paused";
    if (summary_.interrupted) text << ", " << summary_.interrupted << " interrupted";
    text << "\n";
    if (best_) {
      text << "best " << spec_.objective.metric << " = " << FormatShort(*best_, 6) << " (trial "
           << *best_trial_ << ")\n";
      text << "next: hyperpack best " << spec_.name << "   |   hyperpack export " << spec_.name
           << " --format yaml\n";
    }
    if (!options_.on_progress) {
      out_ << text.str();
      return;
    }
    std::istringstream lines(text.str());
    for (std::string line; std::getline(lines, line);) options_.on_progress(line);
  }

  StudySpec spec_;
  RunOptions options_;
  std::ostream& out_;
  asio::io_context own_io_;
  asio::io_context& io_;  // own_io_, or the server's
  asio::signal_set signals_;
  asio::steady_timer ticker_;
  asio::steady_timer time_limit_;
  std::unique_ptr<StorageWriter> writer_;
  std::unique_ptr<tuner::Tuner> tuner_;
  std::unique_ptr<ClusterState> cluster_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Executor> own_executor_;
  Executor* executor_ = nullptr;
  std::vector<std::vector<std::string>>
      gpu_names_;                       // per node: what CUDA_VISIBLE_DEVICES calls them
  std::vector<std::string> node_addr_;  // per node: MASTER_ADDR when rank 0 is there
  std::function<void(Result<RunSummary>)> on_done_;
  std::map<uint64_t, Queued> waiting_;  // scheduler job -> trial waiting for room
  uint64_t jobs_ = 0;
  std::vector<double> durations_;  // of this run's completed trials
  // The one thread that touches tuner_ once the run has started.
  asio::thread_pool tuner_thread_{1};
  bool proposing_ = false;
  std::string warm_note_;
  fs::path log_root_;

  int64_t study_id_ = 0;
  uint64_t seed_ = 0;
  bool resumed_ = false;
  int max_trials_ = 0;
  int max_parallel_ = 0;
  int next_number_ = 0;
  int finished_ = 0;
  int failed_this_run_ = 0;
  int interrupt_count_ = 0;
  bool stopping_ = false;
  bool done_ = false;  // nothing runs and nothing will: handlers must not wait again
  bool line_shown_ = false;
  std::optional<double> best_;
  std::optional<int> best_trial_;
  std::map<int, std::shared_ptr<Trial>> running_;
  std::deque<Queued> retries_;
  // Early stopping, keyed by a trial's root number (every attempt of a trial is one to the
  // pruner). Touched on the io thread only.
  std::unique_ptr<tuner::Pruner> pruner_;
  std::map<int, Paused> paused_;
  std::map<int, double> promoted_early_;  // promoted while still stopping: root -> target
  std::map<int, int64_t> reports_;        // objective reports so far
  std::vector<double> ladder_;            // the first bracket's rungs: the levels the tuner learns
  std::map<int, size_t> ladder_next_;     // per trial, the next of them
  bool preparing_ = true;
  Status storage_error_;
  Clock::time_point start_;
  RunSummary summary_;
};

}  // namespace

std::unique_ptr<StudyRun> MakeStudyRun(const StudySpec& spec, const RunOptions& options,
                                       asio::io_context& io, std::vector<ClusterNode> nodes,
                                       Executor* executor) {
  return std::make_unique<Runner>(spec, options, &io, std::move(nodes), executor);
}

Result<RunSummary> RunStudy(const StudySpec& spec, const RunOptions& options) {
  Runner runner(spec, options);
  return runner.Run();
}

}  // namespace hyperpack::scheduler
