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

#include "hyperpack/config_json.h"
#include "hyperpack/host.h"
#include "hyperpack/scheduler/metrics.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/template.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/tuner.h"
#include "process.h"
#include "storage_writer.h"

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
constexpr auto kDrainAfterExit = std::chrono::seconds(2);

// A trial waiting to start: a new proposal, or the re-run of an interrupted one.
struct Queued {
  Config config;
  int attempt = 1;
  std::optional<int> retry_of;
};

// One running trial. Owned by the runner's map and by the handlers of its pending operations
// (shared_ptr), so that a late handler never touches freed memory; `done` makes it ignore them.
struct Trial {
  Trial(asio::io_context& io) : out(io), err(io), timeout(io), kill(io), drain(io) {}

  int number = 0;
  Config config;
  int attempt = 1;
  std::optional<int> retry_of;
  pid_t pid = -1;
  double started_wall = 0;
  Clock::time_point started;
  asio::posix::stream_descriptor out, err;
  std::array<char, 8192> out_buf{}, err_buf{};
  std::string out_line, err_line;
  std::string err_tail;
  std::ofstream log;
  std::string log_path;
  asio::steady_timer timeout, kill, drain;
  bool exited = false;
  int wait_status = 0;
  bool out_open = true, err_open = true;
  bool timed_out = false, interrupted = false, done = false;
  std::optional<double> objective;
  int64_t metric_lines = 0;
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

class Runner {
 public:
  Runner(const StudySpec& spec, const RunOptions& options)
      : spec_(spec),
        options_(options),
        out_(options.out ? *options.out : std::cout),
        signals_(io_),
        sigchld_(io_, SIGCHLD),
        ticker_(io_),
        time_limit_(io_) {
    max_trials_ = options.max_trials.value_or(spec.budget.max_trials);
    max_parallel_ = options.max_parallel.value_or(spec.budget.max_parallel);
  }

  Result<RunSummary> Run() {
    start_ = Clock::now();
    HP_RETURN_IF_ERROR(Prepare());
    summary_.study = spec_.name;
    if (options_.handle_signals) {
      signals_.add(SIGINT);
      signals_.add(SIGTERM);
      WaitSignal();
    }
    WaitChild();
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
    io_.run();
    tuner_thread_.join();

    // The run is over: record it and let go of the study.
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

    std::map<int, bool> has_retry;
    for (const TrialRecord& t : trials)
      if (t.retry_of) has_retry[*t.retry_of] = true;
    for (const TrialRecord& t : trials) {
      auto config = ConfigFromJson(t.params_json);
      if (!config.ok()) return config.status().WithContext(StrCat("trial ", t.number));
      if (storage::IsFinished(t.state)) {
        ++finished_;
        ObserveStored(t, *config);
      } else if (t.state == TrialState::kInterrupted && !has_retry[t.number]) {
        retries_.push_back({*config, t.attempt + 1, t.number});
      }
    }

    writer_ = std::make_unique<StorageWriter>(
        std::move(db), [this](Status s) { asio::post(io_, [this, s] { OnStorageError(s); }); });
    if (resumed_) {
      Print(StrCat(
          "resuming study '", spec_.name, "': ", finished_, " of ", max_trials_, " trials finished",
          retries_.empty() ? "" : StrCat(", ", retries_.size(), " interrupted to run again")));
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

  void ObserveStored(const TrialRecord& t, const Config& config) {
    tuner::TrialOutcome o;
    o.config = config;
    o.value = t.value;
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
        o.kind = tuner::TrialOutcome::Kind::kPruned;
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
  int Free() const {
    int by_parallel = max_parallel_ - static_cast<int>(running_.size());
    int by_budget = max_trials_ - finished_ - static_cast<int>(running_.size());
    return std::max(0, std::min(by_parallel, by_budget));
  }

  void Fill() {
    if (stopping_) return MaybeFinish();
    int free = Free();
    while (free > 0 && !retries_.empty()) {
      Queued q = std::move(retries_.front());
      retries_.pop_front();
      Launch(std::move(q));
      --free;
    }
    if (free > 0 && !proposing_) {
      // Proposing can take a while (fitting a GP): it runs on the tuner's thread, and the io
      // thread goes on reading metrics and reaping trials meanwhile.
      proposing_ = true;
      std::vector<Config> pending;
      for (const auto& [n, t] : running_) pending.push_back(t->config);
      asio::post(tuner_thread_, [this, free, pending = std::move(pending)] {
        auto proposals = tuner_->Propose(free, pending);
        asio::post(io_, [this, proposals = std::move(proposals)]() mutable {
          OnProposals(std::move(proposals));
        });
      });
    }
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
    if (proposals->empty() && running_.empty() && retries_.empty()) {
      StopLaunching("search space exhausted");
      Print("every configuration of the search space has been tried");
      return MaybeFinish();
    }
    // Slots may have been taken by re-runs meanwhile; extra proposals are dropped.
    int free = Free();
    for (Config& c : *proposals) {
      if (free-- <= 0) break;
      Launch({std::move(c), 1, std::nullopt});
    }
    Fill();
  }

  // Observations reach the tuner on its own thread, in order, before any later Propose.
  void Observe(tuner::TrialOutcome o) {
    asio::post(tuner_thread_, [this, o = std::move(o)] { tuner_->Observe(o); });
  }

  void StopLaunching(const std::string& reason) {
    if (stopping_) return;
    stopping_ = true;
    summary_.stop_reason = reason;
  }

  void MaybeFinish() {
    if (!running_.empty() || proposing_) return;
    if (!stopping_ && Free() > 0) return;
    if (!stopping_) StopLaunching("budget reached");
    // A handler already queued (say, a SIGCHLD that arrived just now) still runs after these
    // cancels; done_ keeps it from waiting again, so that io_context::run returns.
    done_ = true;
    signals_.cancel();
    sigchld_.cancel();
    ticker_.cancel();
    time_limit_.cancel();
  }

  void Launch(Queued q) {
    auto t = std::make_shared<Trial>(io_);
    t->number = next_number_++;
    t->config = std::move(q.config);
    t->attempt = q.attempt;
    t->retry_of = q.retry_of;
    t->started_wall = WallNow();
    t->started = Clock::now();

    char dir_name[32];
    std::snprintf(dir_name, sizeof(dir_name), "trial-%04d", t->number);
    fs::path dir = log_root_ / dir_name;
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::string params_json = ConfigToJson(t->config, &spec_.space);
    fs::path params_file = dir / "params.json";
    std::ofstream(params_file) << params_json << "\n";
    t->log_path = (dir / "output.log").string();
    t->log.open(t->log_path, std::ios::app);

    std::map<std::string, std::string> builtins = {{"trial", std::to_string(t->number)},
                                                   {"study", spec_.name},
                                                   {"params_file", params_file.string()},
                                                   {"trial_dir", dir.string()}};
    SpawnRequest req;
    req.command = study::RenderTemplate(spec_.trial.command, t->config, builtins);
    req.workdir = spec_.trial.workdir;
    std::map<std::string, std::string> env;
    for (const std::string& kv : CurrentEnvironment()) {
      auto eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const ParamSpec& p : spec_.space.params()) env.erase(study::ParamEnvName(p.name));
    // Python buffers a pipe's output until exit, which would hold back every metric line.
    env["PYTHONUNBUFFERED"] = "1";
    env["HYPERPACK_STUDY"] = spec_.name;
    env["HYPERPACK_TRIAL_ID"] = std::to_string(t->number);
    env["HYPERPACK_TRIAL_ATTEMPT"] = std::to_string(t->attempt);
    env["HYPERPACK_TRIAL_DIR"] = dir.string();
    env["HYPERPACK_PARAMS"] = params_json;
    env["HYPERPACK_PARAMS_FILE"] = params_file.string();
    for (const auto& [name, value] : t->config) env[study::ParamEnvName(name)] = FormatValue(value);
    for (const auto& [name, value] : spec_.trial.env)
      env[name] = study::RenderTemplate(value, t->config, builtins);
    for (const auto& [k, v] : env) req.env.push_back(k + "=" + v);

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
    t->log << "# hyperpack trial " << t->number << " (attempt " << t->attempt
           << ")\n# command: " << req.command << "\n";

    // Persist, then act: the trial's row is committed before its process exists, so that storage
    // knows of every process a runner started (and a reader never sees a trial that is not there).
    running_[t->number] = t;
    writer_->PostThen(
        [rec](Storage& db) {
          HP_RETURN_IF_ERROR(db.InsertTrial(rec));
          return db.AddEvent(rec.study_id, {rec.started.value_or(0), rec.number, "trial_started",
                                            "on " + rec.host});
        },
        [this, t, req = std::move(req)](const Status& s) {
          asio::post(io_, [this, t, req, s] { Start(t, req, s); });
        });
  }

  void Start(const std::shared_ptr<Trial>& t, const SpawnRequest& req, const Status& stored) {
    auto never_ran = [&](const std::string& why) {
      t->exited = true;
      t->out_open = t->err_open = false;
      t->err_tail = why;
      t->wait_status = 127 << 8;
      Complete(t);
    };
    // Stopped (Ctrl-C, a storage error) while its row was being written: it never runs.
    if (t->interrupted) return never_ran("interrupted before it started");
    if (!stored.ok()) {
      t->interrupted = true;
      return never_ran(stored.message());
    }
    auto spawned = Spawn(req);
    if (!spawned.ok()) return never_ran(spawned.status().message());
    t->pid = spawned->pid;
    t->out.assign(spawned->stdout_fd);
    t->err.assign(spawned->stderr_fd);
    Event(t->number, "", StrCat("started  ", ParamsLine(t->config, spec_.space)), false);
    Read(t, false);
    Read(t, true);
    if (spec_.trial.timeout_s) {
      t->timeout.expires_after(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(*spec_.trial.timeout_s)));
      t->timeout.async_wait([this, t](boost::system::error_code ec) {
        if (ec || t->done || t->exited) return;
        t->timed_out = true;
        Terminate(t);
      });
    }
  }

  // SIGTERM to the trial's process group, SIGKILL after the grace period.
  void Terminate(const std::shared_ptr<Trial>& t) {
    if (t->pid <= 0 || t->exited) return;
    killpg(t->pid, SIGTERM);
    t->kill.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(options_.kill_grace_s)));
    t->kill.async_wait([t](boost::system::error_code ec) {
      if (!ec && !t->exited) killpg(t->pid, SIGKILL);
    });
  }

  // ---- output of a trial ------------------------------------------------------------------------
  void Read(const std::shared_ptr<Trial>& t, bool is_err) {
    auto& stream = is_err ? t->err : t->out;
    auto& buf = is_err ? t->err_buf : t->out_buf;
    stream.async_read_some(asio::buffer(buf),
                           [this, t, is_err](boost::system::error_code ec, size_t n) {
                             if (t->done) return;
                             std::string& line = is_err ? t->err_line : t->out_line;
                             const auto& buf = is_err ? t->err_buf : t->out_buf;
                             for (size_t i = 0; i < n; ++i) {
                               if (buf[i] == '\n') {
                                 OnLine(*t, line, is_err);
                                 line.clear();
                               } else {
                                 line += buf[i];
                               }
                             }
                             if (ec) {
                               if (!line.empty()) OnLine(*t, line, is_err);
                               line.clear();
                               (is_err ? t->err_open : t->out_open) = false;
                               boost::system::error_code ignored;
                               (is_err ? t->err : t->out).close(ignored);
                               MaybeComplete(t);
                               return;
                             }
                             Read(t, is_err);
                           });
  }

  void OnLine(Trial& t, const std::string& line, bool is_err) {
    t.log << line << "\n";
    if (is_err) {
      t.err_tail += line;
      t.err_tail += '\n';
      if (t.err_tail.size() > kStderrTail) t.err_tail.erase(0, t.err_tail.size() - kStderrTail);
      return;
    }
    auto m = ParseMetricLine(line);
    if (!m) return;
    int64_t step = m->step.value_or(t.metric_lines);
    ++t.metric_lines;
    std::vector<storage::MetricPoint> points;
    double now = WallNow();
    for (const auto& [name, value] : m->values) {
      if (name == spec_.objective.metric) UpdateObjective(t, value);
      // SQLite stores NaN as NULL; a NaN point says nothing a chart could show.
      if (!std::isnan(value)) points.push_back({step, name, value, now});
    }
    if (points.empty()) return;
    int64_t id = study_id_;
    int number = t.number;
    Post([id, number, points = std::move(points)](Storage& db) {
      return db.AddMetrics(id, number, points);
    });
  }

  void UpdateObjective(Trial& t, double v) {
    using S = study::ObjectiveStrategy;
    S s = spec_.objective.strategy;
    if (s == S::kBest)
      s = spec_.objective.direction == study::Direction::kMinimize ? S::kMin : S::kMax;
    if (s == S::kLast || !t.objective || std::isnan(*t.objective)) {
      t.objective = v;
    } else if (!std::isnan(v)) {
      t.objective = s == S::kMin ? std::min(*t.objective, v) : std::max(*t.objective, v);
    }
  }

  // ---- process exit --------------------------------------------------------------------------
  void WaitChild() {
    sigchld_.async_wait([this](boost::system::error_code ec, int) {
      if (ec || done_) return;
      Reap();
      WaitChild();
    });
  }

  void Reap() {
    // One SIGCHLD may stand for several exits; ask about every trial we run.
    std::vector<std::shared_ptr<Trial>> exited;
    for (auto& [n, t] : running_) {
      if (t->exited || t->pid <= 0) continue;
      int status = 0;
      pid_t r = waitpid(t->pid, &status, WNOHANG);
      if (r != t->pid) continue;
      t->exited = true;
      t->wait_status = status;
      // Whatever the trial left behind in its group dies with it, and so the pipes close.
      killpg(t->pid, SIGKILL);
      t->timeout.cancel();
      t->kill.cancel();
      exited.push_back(t);
    }
    for (auto& t : exited) {
      // A descendant that left the group could hold the pipes open; do not wait on it forever.
      t->drain.expires_after(kDrainAfterExit);
      t->drain.async_wait([this, t](boost::system::error_code ec) {
        if (ec || t->done) return;
        boost::system::error_code ignored;
        t->out.close(ignored);
        t->err.close(ignored);
      });
      MaybeComplete(t);
    }
  }

  void MaybeComplete(const std::shared_ptr<Trial>& t) {
    if (t->done || !t->exited || t->out_open || t->err_open) return;
    Complete(t);
  }

  void Complete(const std::shared_ptr<Trial>& t) {
    t->done = true;
    t->drain.cancel();
    t->timeout.cancel();
    t->kill.cancel();
    running_.erase(t->number);
    double ended = WallNow();
    double elapsed = std::chrono::duration<double>(Clock::now() - t->started).count();

    TrialRecord rec;
    rec.study_id = study_id_;
    rec.number = t->number;
    rec.ended = ended;
    int code = -1;
    std::string how;
    if (WIFEXITED(t->wait_status)) {
      code = WEXITSTATUS(t->wait_status);
      rec.exit_status = code;
      how = StrCat("exit ", code);
      if (t->pid <= 0) how = "never started";
    } else if (WIFSIGNALED(t->wait_status)) {
      int sig = WTERMSIG(t->wait_status);
      rec.exit_status = 128 + sig;
      how = StrCat("killed by signal ", sig, " (", strsignal(sig), ")");
    }
    std::string tail = LastLines(t->err_tail, 20);
    const std::string& metric = spec_.objective.metric;
    if (t->interrupted) {
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
    t->log << "# trial " << t->number << " " << storage::TrialStateName(rec.state) << " (" << how
           << ") after " << FormatDuration(elapsed) << "\n";
    t->log.close();
    Post([rec](Storage& db) {
      HP_RETURN_IF_ERROR(db.FinishTrial(rec));
      return db.AddEvent(rec.study_id, {*rec.ended, rec.number, "trial_finished",
                                        StrCat(storage::TrialStateName(rec.state),
                                               rec.value ? " " + FormatDouble(*rec.value) : "")});
    });

    // Learn, count, tell.
    std::string line;
    if (rec.state == TrialState::kInterrupted) {
      ++summary_.interrupted;
      retries_.push_back({t->config, t->attempt + 1, t->number});
      line = "interrupted";
    } else {
      ++finished_;
      tuner::TrialOutcome o;
      o.config = t->config;
      o.value = rec.value;
      switch (rec.state) {
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
      Observe(std::move(o));
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
      if (interrupt_count_++ == 0) {
        StopLaunching("interrupted");
        summary_.exit_code = 130;
        Print(StrCat("\n", sig == SIGINT ? "Ctrl-C" : "SIGTERM", ": stopping ", running_.size(),
                     " running trials (again to kill them at once); resume with the same command"));
        for (auto& [n, t] : running_) {
          t->interrupted = true;
          Terminate(t);
        }
      } else {
        for (auto& [n, t] : running_)
          if (!t->exited) killpg(t->pid, SIGKILL);
      }
      MaybeFinish();
      if (!done_) WaitSignal();
    });
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
    out_ << "study '" << spec_.name << "' " << summary_.stop_reason << " after "
         << FormatDuration(secs) << ": " << finished_ << "/" << max_trials_ << " trials finished ("
         << summary_.completed << " completed, " << summary_.failed << " failed, "
         << summary_.infeasible << " infeasible)";
    if (summary_.interrupted) out_ << ", " << summary_.interrupted << " interrupted";
    out_ << "\n";
    if (best_) {
      out_ << "best " << spec_.objective.metric << " = " << FormatShort(*best_, 6) << " (trial "
           << *best_trial_ << ")\n";
      out_ << "next: hyperpack best " << spec_.name << "   |   hyperpack export " << spec_.name
           << " --format yaml\n";
    }
  }

  StudySpec spec_;
  RunOptions options_;
  std::ostream& out_;
  asio::io_context io_;
  asio::signal_set signals_;
  asio::signal_set sigchld_;
  asio::steady_timer ticker_;
  asio::steady_timer time_limit_;
  std::unique_ptr<StorageWriter> writer_;
  std::unique_ptr<tuner::Tuner> tuner_;
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
  Status storage_error_;
  Clock::time_point start_;
  RunSummary summary_;
};

}  // namespace

Result<RunSummary> RunStudy(const StudySpec& spec, const RunOptions& options) {
  Runner runner(spec, options);
  return runner.Run();
}

}  // namespace hyperpack::scheduler
