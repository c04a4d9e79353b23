// The live driver of a StudyController: turns Asio, processes and SQLite into the controller's
// events, and its commands back into them. It decides nothing.
//
// Threads: every member is touched on the io thread, except the tuner (on a strand of the pool,
// in order) and the Storage (on the StorageWriter's thread). Opening and claiming the study, and
// closing the writer at the end, run on the pool and post their results back, so the io thread
// (hyperpack serve's only one) never waits on SQLite or a join.
#include <signal.h>

#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <list>
#include <map>
#include <optional>
#include <set>

#include "hyperpack/env_vars.h"
#include "hyperpack/host.h"
#include "hyperpack/scheduler/executor.h"
#include "hyperpack/scheduler/metrics.h"
#include "hyperpack/scheduler/runner.h"
#include "hyperpack/scheduler/study_run.h"
#include "hyperpack/text.h"
#include "metric_files.h"
#include "storage_writer.h"
#include "study_store.h"

namespace hyperpack::scheduler {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kStderrTail = 4096;

// What the driver keeps of a launched trial: its ranks' logs and stderr tails.
struct TrialFiles {
  std::vector<std::ofstream> logs;
  std::vector<std::string> err_tails;
  std::string checkpoint_dir;
  // Whether the checkpoint folder has held something. Once it has, it is not read again: a
  // trainer replaces its checkpoint, it does not empty the folder, and the folder is read on the io
  // thread at every metric line until then.
  bool checkpoint_seen = false;
};

class LocalDriver : public StudyRun {
 public:
  LocalDriver(const study::StudySpec& spec, const RunOptions& options, asio::io_context& io,
              asio::thread_pool& pool, std::vector<ClusterNode> nodes, Executor* executor)
      : spec_(spec),
        options_(options),
        out_(options.out ? *options.out : std::cout),
        io_(io),
        pool_(pool),
        tuner_strand_(asio::make_strand(pool)),
        follow_strand_(asio::make_strand(pool)),
        signals_(io),
        ticker_(io),
        follow_timer_(io),
        control_timer_(io),
        nodes_(std::move(nodes)) {
    Executor::Callbacks cb{
        [this](RankId id, bool is_err, const std::string& line) { OnLine(id, is_err, line); },
        [this](RankId id, RankExit exit) { OnExit(id, exit); }, nullptr,
        [this](int trial, double queued_s, const std::string& where) {
          Feed(TrialRunning{trial, queued_s, where});
        }};
    if (executor) {
      executor_ = executor;
      executor_->SetCallbacks(cb);
    } else {
      own_executor_ = MakeLocalExecutor(io_, cb);
      executor_ = own_executor_.get();
    }
  }

  Status Begin(std::function<void(Result<RunSummary>)> on_done) override {
    // Bad pruner settings are refused before anything is stored.
    HP_RETURN_IF_ERROR(tuner::MakePruner(PrunerOptionsFor(spec_)).status());
    HP_ASSIGN_OR_RETURN(patterns_, MetricPatterns::Make(spec_.metric_patterns));
    if (spec_.trial.shim != study::TrialShim::kNone &&
        !CompanionShimPath(study::TrialShimName(spec_.trial.shim)))
      return Status::FailedPrecondition(
          "trial.shim: ", study::TrialShimName(spec_.trial.shim),
          ": hyperpack's stand-in for that client is not installed beside this program (looked in "
          "../share/hyperpack/shims and ../shims); reinstall hyperpack, or remove trial.shim to "
          "use the real package");
    on_done_ = std::move(on_done);
    start_ = Clock::now();
    wall_start_ = WallNow();
    work_.emplace(io_.get_executor());
    if (options_.handle_signals) {
      signals_.add(SIGINT);
      signals_.add(SIGTERM);
      WaitSignal();
    }
    asio::post(pool_, [this] {
      auto prepared = std::make_shared<Result<PreparedStudy>>(Prepare());
      asio::post(io_, [this, prepared] { OnPrepared(std::move(*prepared)); });
    });
    return Status::Ok();
  }

  void AddNode(const ClusterNode& n) override {
    if (!controller_) return nodes_.push_back(n);
    Feed(NodeJoined{n});
  }
  void RemoveNode(int index) override {
    if (controller_) return Feed(NodeLost{index});
    if (index >= 0 && index < static_cast<int>(nodes_.size()))
      nodes_[index].node.gpus = nodes_[index].node.cpus = 0;
  }
  void Interrupt() override { OnSignal(SIGTERM); }
  Occupancy occupancy() const override {
    return controller_ ? controller_->occupancy() : Occupancy{};
  }
  std::optional<ShareClaim> Claim() const override {
    if (!controller_ || done_) return std::nullopt;
    ShareClaim c = controller_->Claim();
    c.weight = controller_->priority();
    return c;
  }
  void SetShare(const ShareGrant& grant) override {
    if (!controller_) {
      early_share_ = grant;  // handed on once the study is prepared
      return;
    }
    Feed(ShareChanged{grant});
  }
  void OnChange(std::function<void()> callback) override { on_change_ = std::move(callback); }

 private:
  // ---- Start and end (storage work on the pool) ----
  Result<PreparedStudy> Prepare() {
    HP_ASSIGN_OR_RETURN(PreparedStudy p,
                        PrepareStudy(spec_, options_.storage_path, options_.log_dir));
    auto tuner = tuner::MakeTuner(spec_.space, TunerOptionsFor(spec_, p.seed));
    if (!tuner.ok()) {
      (void)p.db->SetRunner(p.study_id, std::nullopt, "");
      return tuner.status();
    }
    tuner_ = std::move(*tuner);
    for (const tuner::TrialOutcome& o : p.warm) tuner_->Observe(o);
    // Its own handle: controls are read on the follow strand while the writer writes.
    auto controls = storage::OpenStorage(options_.storage_path);
    if (!controls.ok()) {
      (void)p.db->SetRunner(p.study_id, std::nullopt, "");
      return controls.status();
    }
    control_db_ = std::move(*controls);
    return p;
  }

  void OnPrepared(Result<PreparedStudy> prepared) {
    if (!prepared.ok()) return Done(prepared.status());
    PreparedStudy& p = *prepared;
    study_id_ = p.study_id;
    writer_ = std::make_unique<StorageWriter>(std::move(p.db), [this](Status s) {
      asio::post(io_, [this, s] {
        if (storage_error_.ok()) storage_error_ = s;
        Feed(StorageFailed{s});
      });
    });
    ControllerOptions co;
    co.study_id = p.study_id;
    co.max_trials = options_.max_trials.value_or(spec_.budget.max_trials);
    co.max_parallel = options_.max_parallel.value_or(spec_.budget.max_parallel);
    co.kill_grace_s = options_.kill_grace_s;
    co.wall_start = wall_start_;
    co.host = HostName();
    co.log_root = p.log_root;
    co.nodes = nodes_;
    co.start_note = p.warm_note;
    co.storage_path = options_.storage_path;
    co.continue_in_place = executor_->CanTell();
    co.share = early_share_;
    co.preempt_after_s = options_.preempt_after_s;
    auto controller = StudyController::Make(spec_, co);
    auto first = controller.ok() ? (*controller)->Restore(p.stored)
                                 : Result<std::vector<Command>>(controller.status());
    if (!first.ok()) {
      writer_->Post(
          [id = p.study_id](storage::Storage& db) { return db.SetRunner(id, std::nullopt, ""); });
      return Close(first.status());
    }
    controller_ = std::move(*controller);
    for (const storage::ControlRecord& c : p.stored.controls) fed_controls_.insert(c.id);
    Perform(std::move(*first));
    Perform(controller_->Start(Now()));
    if (!done_) ArmControls();
    if (options_.progress == RunOptions::Progress::kLine && !done_) Tick();
    if (interrupted_early_ && !done_) Feed(scheduler::Interrupt{false});
    if (on_change_ && !done_) on_change_();
  }

  // The controller has finished: the writer is closed on the tuner's strand (after every
  // observation still queued there, and after every read of a trial's metric files, which run on
  // their own strand), and the run's result is handed back on the io thread, after what those
  // reads posted: nothing reaches this driver once its owner has been told.
  void Close(Result<RunSummary> result) {
    done_ = true;
    for (auto& timer : wakes_) timer->cancel();
    wakes_.clear();
    signals_.cancel();
    ticker_.cancel();
    follow_timer_.cancel();
    control_timer_.cancel();
    if (own_executor_) own_executor_->Shutdown();
    asio::post(follow_strand_, [this, result = std::move(result)]() mutable {
      asio::post(tuner_strand_, [this, result = std::move(result)]() mutable {
        writer_->Close();
        control_db_.reset();
        asio::post(io_, [this, result = std::move(result)]() mutable {
          if (result.ok() && !storage_error_.ok()) result = storage_error_;
          Done(std::move(result));
        });
      });
    });
  }

  void Done(Result<RunSummary> result) {
    done_ = true;
    control_timer_.cancel();
    signals_.cancel();
    ticker_.cancel();
    follow_timer_.cancel();
    if (own_executor_) own_executor_->Shutdown();
    ClearStatusLine();
    if (result.ok()) PrintSummary(*result);
    work_.reset();
    if (on_done_) on_done_(std::move(result));
  }

  // ---- Events in ----
  double Now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // Events are handled one at a time: one that a command raises waits for the rest of its batch.
  void Feed(EventPayload payload) {
    if (!controller_) return;
    inbox_.push_back(std::move(payload));
    if (feeding_) return;
    feeding_ = true;
    while (!inbox_.empty() && !done_) {
      EventPayload next = std::move(inbox_.front());
      inbox_.pop_front();
      Perform(controller_->Handle({Now(), std::move(next)}));
    }
    inbox_.clear();
    feeding_ = false;
    if (on_change_ && !done_) on_change_();
  }

  void OnLine(RankId id, bool is_err, const std::string& line) {
    auto it = files_.find(id.trial);
    if (it == files_.end() || id.rank >= static_cast<int>(it->second.logs.size())) return;
    TrialFiles& f = it->second;
    // Line by line: `hyperpack logs -f` and a user's tail read the file while the trial runs.
    f.logs[id.rank] << line << "\n" << std::flush;
    if (is_err) {
      std::string& tail = f.err_tails[id.rank];
      tail += line;
      tail += '\n';
      if (tail.size() > kStderrTail) tail.erase(0, tail.size() - kStderrTail);
      if (spec_.trial.metrics_from != study::MetricsSource::kOutput) return;
    }
    if (id.rank != 0 || MetricsFromFiles()) return;  // rank 0's metrics are the trial's
    auto m = ParseMetricLine(line, patterns_);
    if (!m) return;
    Report(id.trial, std::move(*m));
  }

  void Report(int trial, MetricLine line) {
    auto it = files_.find(trial);
    if (it == files_.end()) return;
    TrialFiles& f = it->second;
    if (controller_->pauses() && !f.checkpoint_seen)
      f.checkpoint_seen = FolderHoldsSomething(f.checkpoint_dir);
    const bool checkpoint = controller_->pauses() && f.checkpoint_seen;
    Feed(MetricReport{trial, std::move(line), checkpoint});
  }

  void OnExit(RankId id, RankExit exit) {
    std::string tail;
    auto it = files_.find(id.trial);
    if (it != files_.end() && id.rank < static_cast<int>(it->second.err_tails.size()))
      tail = it->second.err_tails[id.rank];
    RankExited exited{id.trial, id.rank, exit, tail};
    auto follow = follows_.find(id.trial);
    if (id.rank != 0 || follow == follows_.end()) return Feed(std::move(exited));
    // What the trial wrote last is read before its end is told.
    follow->second.exit = std::move(exited);
    if (!follow->second.polling) Poll(id.trial, /*last=*/true);
  }

  // ---- Controls (hyperpack stop, enqueue, ...): read from storage every kControlPoll ----
  static constexpr std::chrono::milliseconds kControlPoll{250};

  void ArmControls() {
    control_timer_.expires_after(kControlPoll);
    control_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || done_) return;
      // On the follow strand, which Close drains before the handle is closed.
      asio::post(follow_strand_, [this] {
        auto pending = std::make_shared<Result<std::vector<storage::ControlRecord>>>(
            control_db_->ListControls(study_id_, /*pending_only=*/true));
        asio::post(io_, [this, pending] { OnControls(std::move(*pending)); });
      });
    });
  }

  // A control is fed once: it stays pending until the writer has recorded its answer. A failed
  // read is tried again at the next poll (the writer reports a store that is really gone).
  void OnControls(Result<std::vector<storage::ControlRecord>> pending) {
    if (done_) return;
    if (pending.ok())
      for (storage::ControlRecord& c : *pending)
        if (fed_controls_.insert(c.id).second) Feed(ControlArrived{std::move(c)});
    if (!done_) ArmControls();
  }

  // ---- Metrics from files (trial.metrics_from: tensorboard | file) ----
  bool MetricsFromFiles() const {
    return spec_.trial.metrics_from == study::MetricsSource::kTensorboard ||
           spec_.trial.metrics_from == study::MetricsSource::kFile;
  }

  // Notes what is in the trial's metrics path now (an earlier trial's files are not its own).
  void Follow(const LaunchPlan& plan) {
    if (!MetricsFromFiles() || plan.metrics_path.empty()) return;
    fs::path path(plan.metrics_path);
    if (path.is_relative())
      path = (plan.workdir.empty() ? fs::current_path() : fs::path(plan.workdir)) / path;
    follows_[plan.trial].follower = std::make_shared<MetricFileFollower>(
        spec_.trial.metrics_from, path.lexically_normal().string(), patterns_);
    if (!follow_timer_armed_) FollowTick();
  }

  void FollowTick() {
    // A trial whose files are closed (it never started, or ended) is followed no more.
    std::erase_if(follows_, [this](const auto& entry) {
      return !entry.second.polling && !entry.second.exit && !files_.count(entry.first);
    });
    for (auto& [trial, follow] : follows_)
      if (!follow.polling && !follow.exit) Poll(trial, /*last=*/false);
    follow_timer_armed_ = !follows_.empty() && !done_;
    if (!follow_timer_armed_) return;
    follow_timer_.expires_after(std::chrono::milliseconds(500));
    follow_timer_.async_wait([this](boost::system::error_code ec) {
      follow_timer_armed_ = false;
      if (!ec && !done_) FollowTick();
    });
  }

  // Reads the trial's files on the pool (the follow strand) and reports what they gained on the io
  // thread; after the last read, the trial's end.
  void Poll(int trial, bool last) {
    Followed& follow = follows_.at(trial);
    follow.polling = true;
    asio::post(follow_strand_, [this, trial, last, follower = follow.follower] {
      auto notes = std::make_shared<std::vector<std::string>>();
      auto lines = std::make_shared<std::vector<MetricLine>>(follower->Poll(notes.get(), last));
      asio::post(io_, [this, trial, last, lines, notes] { Polled(trial, last, *lines, *notes); });
    });
  }

  void Polled(int trial, bool last, std::vector<MetricLine>& lines,
              const std::vector<std::string>& notes) {
    auto it = follows_.find(trial);
    if (it == follows_.end() || done_) return;
    it->second.polling = false;
    if (auto f = files_.find(trial); f != files_.end() && !f->second.logs.empty())
      for (const std::string& note : notes) f->second.logs[0] << "# hyperpack: " << note << "\n";
    for (MetricLine& line : lines) Report(trial, std::move(line));
    if (!it->second.exit) return;
    if (!last) return Poll(trial, /*last=*/true);
    RankExited exited = std::move(*it->second.exit);
    follows_.erase(it);
    Feed(std::move(exited));
  }

  void WaitSignal() {
    signals_.async_wait([this](boost::system::error_code ec, int sig) {
      if (ec || done_) return;
      OnSignal(sig);
      if (!done_) WaitSignal();
    });
  }

  void OnSignal(int sig) {
    if (done_) return;
    if (!controller_) {
      interrupted_early_ = true;  // handed on once the study is prepared
      return;
    }
    Feed(scheduler::Interrupt{sig == SIGINT});
  }

  // ---- Commands out ----
  void Perform(std::vector<Command> commands) {
    for (Command& c : commands) std::visit([this](auto& cmd) { Do(cmd); }, c);
  }

  void Do(ProposeCmd& c) {
    asio::post(
        tuner_strand_, [this, n = c.n, pending = std::move(c.pending), spent = c.budget_spent] {
          const auto asked = Clock::now();
          tuner_->SetBudgetSpent(spent);
          auto ready =
              std::make_shared<ProposalsReady>(ProposalsReady{tuner_->Propose(n, pending), {}});
          const double took = std::chrono::duration<double>(Clock::now() - asked).count();
          if (ready->configs.ok())
            for (const Config& c : *ready->configs) ready->costs.push_back(tuner_->PredictCost(c));
          asio::post(io_, [this, ready, took, n] {
            if (options_.on_proposed) options_.on_proposed(took, n);
            Feed(std::move(*ready));
          });
        });
  }
  void Do(ObserveCmd& c) {
    asio::post(tuner_strand_, [this, o = std::move(c.outcome)] { tuner_->Observe(o); });
  }
  void Do(WriteCmd& c) {
    StorageWriter::Op op = [id = study_id_, rows = std::move(c.rows)](storage::Storage& db) {
      return ApplyRows(db, id, rows);
    };
    if (!c.ack) return writer_->Post(std::move(op));
    writer_->PostThen(std::move(op), [this, trial = *c.ack](const Status& s) {
      asio::post(io_, [this, trial, s] { Feed(TrialPersisted{trial, s}); });
    });
  }
  void Do(LaunchCmd& c) { Launch(c.plan); }
  void Do(SignalCmd& c) {
    executor_->Signal({c.trial, c.rank}, c.kind == SignalKind::kKill ? SIGKILL : SIGTERM);
  }
  void Do(ContinueCmd& c) {
    Status told = executor_->Tell({c.trial, 0}, "continue " + FormatShort(c.target, 12));
    if (told.ok()) return;
    // It cannot hear: stopped now, it is paused at its rung and restarted from its checkpoint.
    auto it = files_.find(c.trial);
    if (it != files_.end() && !it->second.logs.empty())
      it->second.logs[0] << "# hyperpack: " << told.message() << "; it is stopped and resumed\n";
    executor_->Signal({c.trial, 0}, SIGTERM);
  }
  void Do(WakeCmd& c) {
    auto timer = std::make_shared<asio::steady_timer>(io_);
    timer->expires_at(
        start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.at)));
    wakes_.push_back(timer);
    timer->async_wait([this, timer](boost::system::error_code ec) {
      if (ec || done_) return;
      wakes_.remove(timer);
      Feed(scheduler::Tick{});
    });
  }
  void Do(SayCmd& c) { Print(c.text); }
  void Do(CloseLogsCmd& c) {
    auto it = files_.find(c.trial);
    if (it == files_.end()) return;
    for (std::ofstream& log : it->second.logs)
      if (log.is_open()) log << c.footer;
    files_.erase(it);
  }
  void Do(FinishCmd& c) { Close(c.summary); }

  // The study's stand-in for another tool's client, first on the trial's PYTHONPATH.
  void AddShim(std::map<std::string, std::string>* env) const {
    if (spec_.trial.shim == study::TrialShim::kNone) return;
    const std::optional<std::string> dir =
        CompanionShimPath(study::TrialShimName(spec_.trial.shim));
    if (!dir) return;  // refused when the run began
    std::string& path = (*env)["PYTHONPATH"];
    path = path.empty() ? *dir : *dir + ":" + path;
  }

  // Every rank of `plan` ends before it starts, for `why`, which rank 0's log says.
  void NeverStarted(const LaunchPlan& plan, TrialFiles& f, const std::string& why) {
    for (size_t r = 0; r < plan.ranks.size(); ++r) {
      if (r == 0) {
        f.logs.emplace_back(plan.ranks[0].log_path, std::ios::app);
        f.logs.back() << plan.ranks[0].log_header << why << "\n";
      }
      Feed(RankExited{plan.trial, static_cast<int>(r), RankExit::NeverStarted(),
                      r == 0 ? why : std::string()});
    }
  }

  // What every rank of `plan` inherits: this process's environment less plan.clear_env, with the
  // companion trainer first on PATH, the shim, and a free rendezvous port where one is needed.
  std::map<std::string, std::string> BaseEnvironment(const LaunchPlan& plan) const {
    std::map<std::string, std::string> base = EnvironmentMap(CurrentEnvironment());
    for (const std::string& name : plan.clear_env) base.erase(name);
    // The trainer that came with this hyperpack, first on the trial's PATH.
    static const std::optional<std::string> trainer_dir = CompanionTrainerDir();
    if (trainer_dir) {
      std::string& path = base["PATH"];
      path = path.empty() ? *trainer_dir : *trainer_dir + ":" + path;
    }
    AddShim(&base);
    if (plan.needs_master_port) base[env::kMasterPort] = std::to_string(FreeLoopbackPort());
    return base;
  }

  // Its folders, its parameters file and its ranks' logs, then the processes.
  void Launch(const LaunchPlan& plan) {
    std::error_code ec;
    fs::create_directories(plan.trial_dir, ec);
    std::ofstream(plan.params_file) << plan.params_json << "\n";
    TrialFiles& f = files_[plan.trial];
    f.checkpoint_dir = plan.checkpoint_dir;
    f.err_tails.resize(plan.ranks.size());
    // The command is told HYPERPACK_CHECKPOINT_DIR and may write there at once. Without it the
    // trial cannot run as meant: no rank starts, and rank 0's log says why.
    fs::create_directories(plan.checkpoint_dir, ec);
    if (ec) {
      NeverStarted(plan, f,
                   StrCat("cannot create the checkpoint directory ", plan.checkpoint_dir, ": ",
                          ec.message()));
      return;
    }
    const std::map<std::string, std::string> base = BaseEnvironment(plan);
    GangRequest gang;
    gang.trial = plan.trial;
    gang.root = plan.root;
    gang.attempt = plan.attempt;
    gang.trial_dir = plan.trial_dir;
    for (size_t r = 0; r < plan.ranks.size(); ++r) {
      const RankPlan& rank = plan.ranks[r];
      f.logs.emplace_back(rank.log_path, std::ios::app);
      f.logs.back() << rank.log_header;
      std::map<std::string, std::string> env = base;
      for (const auto& [k, v] : rank.env) env[k] = v;
      GangRequest::Rank& g = gang.ranks.emplace_back();
      g.node = rank.node;
      if (r < plan.placement.ranks.size()) {
        g.gpus = static_cast<int>(plan.placement.ranks[r].gpus.size());
        g.cpus = plan.placement.ranks[r].cpus;
        g.share = plan.placement.ranks[r].share;
      }
      g.request.command = plan.command;
      g.request.workdir = plan.workdir;
      g.request.control = plan.control && r == 0;
      g.request.warm_argv = plan.warm_argv;
      g.request.lock_path = rank.lock_path;
      for (const auto& [k, v] : env) g.request.env.push_back(k + "=" + v);
    }
    Follow(plan);
    const GangStarted started = executor_->StartGang(gang);
    if (started.started == static_cast<int>(gang.ranks.size())) return;
    // This rank and the ones after it never start; on a node lost meanwhile (between the
    // placement and the stored row), they are lost with it, and the trial is requeued.
    const RankExit how = started.status.code() == StatusCode::kUnavailable
                             ? RankExit::Lost()
                             : RankExit::NeverStarted();
    for (size_t rest = started.started; rest < plan.ranks.size(); ++rest)
      Feed(RankExited{
          plan.trial, static_cast<int>(rest), how,
          static_cast<int>(rest) == started.started ? started.status.message() : std::string()});
  }

  // ---- What people see ----
  std::string Elapsed() const {
    auto s = static_cast<int64_t>(Now());
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
    return buf;
  }

  void Print(const std::string& text) {
    if (options_.on_progress) return options_.on_progress(StrCat("[", Elapsed(), "] ", text));
    if (options_.progress == RunOptions::Progress::kQuiet) return;
    if (options_.progress == RunOptions::Progress::kLine) {
      out_ << "\r\033[K[" << Elapsed() << "] " << text << "\n" << StatusLine() << std::flush;
      line_shown_ = true;
      return;
    }
    out_ << "[" << Elapsed() << "] " << text << std::endl;
  }

  std::string StatusLine() const {
    return StrCat("[", Elapsed(), "] ", controller_ ? controller_->StatusLine() : "starting");
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

  void PrintSummary(const RunSummary& summary) {
    std::string text = FormatSummary(summary, spec_.objective.metric);
    if (!options_.on_progress) {
      out_ << text;
      return;
    }
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) options_.on_progress(line);
  }

  study::StudySpec spec_;
  MetricPatterns patterns_;  // the study's, compiled by Begin
  RunOptions options_;
  std::ostream& out_;
  asio::io_context& io_;
  asio::thread_pool& pool_;
  asio::strand<asio::thread_pool::executor_type> tuner_strand_;
  // Reads of trials' metric files (trial.metrics_from), one at a time, apart from the tuner's.
  asio::strand<asio::thread_pool::executor_type> follow_strand_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  asio::signal_set signals_;
  asio::steady_timer ticker_;
  // trial.metrics_from: tensorboard | file: each running trial's follower, polled every 0.5 s.
  struct Followed {
    std::shared_ptr<MetricFileFollower> follower;
    bool polling = false;            // a Poll is on the pool
    std::optional<RankExited> exit;  // rank 0 has exited: told after the last read
  };
  std::map<int, Followed> follows_;
  asio::steady_timer follow_timer_;
  bool follow_timer_armed_ = false;
  asio::steady_timer control_timer_;
  std::unique_ptr<storage::Storage> control_db_;  // on follow_strand_ only, once prepared
  std::set<int64_t> fed_controls_;
  std::list<std::shared_ptr<asio::steady_timer>> wakes_;
  std::vector<ClusterNode> nodes_;  // until the controller takes them
  std::unique_ptr<Executor> own_executor_;
  Executor* executor_ = nullptr;
  std::unique_ptr<tuner::Tuner> tuner_;  // on tuner_strand_ only, once prepared
  std::unique_ptr<StorageWriter> writer_;
  std::unique_ptr<StudyController> controller_;
  std::map<int, TrialFiles> files_;
  std::deque<EventPayload> inbox_;
  std::optional<ShareGrant> early_share_;
  std::function<void()> on_change_;
  std::function<void(Result<RunSummary>)> on_done_;
  Clock::time_point start_;
  double wall_start_ = 0;
  int64_t study_id_ = 0;
  Status storage_error_;
  bool feeding_ = false;
  bool done_ = false;
  bool interrupted_early_ = false;
  bool line_shown_ = false;
};

}  // namespace

std::unique_ptr<StudyRun> MakeStudyRun(const study::StudySpec& spec, const RunOptions& options,
                                       asio::io_context& io, asio::thread_pool& pool,
                                       std::vector<ClusterNode> nodes, Executor* executor) {
  return std::make_unique<LocalDriver>(spec, options, io, pool, std::move(nodes), executor);
}

Result<RunSummary> RunStudy(const study::StudySpec& spec, const RunOptions& options) {
  asio::io_context io;
  asio::thread_pool pool(2);
  LocalNode local = options.node ? *options.node : DetectLocalNode();
  std::vector<ClusterNode> nodes = {
      {{local.name, static_cast<int>(local.gpus.size()), local.cpus, local.gpu_memory_mb},
       local.gpus,
       "127.0.0.1"}};
  LocalDriver driver(spec, options, io, pool, std::move(nodes), nullptr);
  Result<RunSummary> result = Status::Internal("the run ended without a result");
  HP_RETURN_IF_ERROR(driver.Begin([&](Result<RunSummary> r) { result = std::move(r); }));
  io.run();
  pool.join();
  return result;
}

}  // namespace hyperpack::scheduler
