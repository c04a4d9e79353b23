#include "slurm_executor.h"

#include <signal.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "command.h"
#include "hyperpack/env_vars.h"
#include "hyperpack/text.h"

namespace hyperpack::scheduler::slurm {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr double kCommandTimeout = 60;
constexpr double kFollowInterval = 0.25;  // output files are read this often
constexpr size_t kMaxLine = 64 << 10;     // as the local executor cuts a line
constexpr size_t kReadChunk = 1 << 20;    // per file per read, so one huge file cannot stall
constexpr int kMissingPolls = 3;          // polls a known job may be absent before it is judged

// Variables hyperpack-run sets per rank on this machine; under Slurm, slurm-task derives them.
bool SetBySlurmTask(const std::string& name) {
  static const std::set<std::string> kNames = {
      env::kRank,       env::kWorldSize,  env::kLocalRank,          env::kLocalWorldSize,
      env::kMasterAddr, env::kMasterPort, env::kCudaVisibleDevices,
  };
  return kNames.count(name) > 0;
}

// A name the shell can export (other names are left out of the script).
bool ShellName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// A file read as it grows, cut into lines.
struct Follower {
  std::string path;
  uint64_t offset = 0;
  std::string partial;
  size_t dropped = 0;  // bytes of the current line past kMaxLine

  // Appends the complete lines read since the last call; at the end, the unterminated rest too.
  void Read(std::vector<std::string>* lines, bool at_end) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      in.seekg(0, std::ios::end);
      const auto size = static_cast<uint64_t>(in.tellg());
      if (size < offset) offset = 0;  // truncated (a new file): start again
      in.seekg(static_cast<std::streamoff>(offset));
      std::string buf(std::min<uint64_t>(size - offset, kReadChunk), '\0');
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.resize(static_cast<size_t>(in.gcount()));
      offset += buf.size();
      for (char c : buf) {
        if (c == '\n') {
          Flush(lines);
          continue;
        }
        if (partial.size() < kMaxLine) {
          partial += c;
        } else {
          ++dropped;
        }
      }
    }
    if (at_end && (!partial.empty() || dropped)) Flush(lines);
  }
  void Flush(std::vector<std::string>* lines) {
    if (dropped) partial += StrCat(" [line cut: ", dropped, " more bytes]");
    lines->push_back(std::move(partial));
    partial.clear();
    dropped = 0;
  }
};

class SlurmExecutor : public Executor {
 public:
  SlurmExecutor(asio::io_context& io, ExecutorOptions options)
      : io_(io),
        options_(std::move(options)),
        commands_(1),
        poll_timer_(io),
        follow_timer_(io),
        start_(Clock::now()) {
    inherited_ = CurrentEnvironment();
    for (const SqueueRow& row : options_.existing) {
      auto tag = ParseJobComment(row.comment);
      if (tag && tag->study == options_.study && !IsFinal(row.state))
        orphans_.push_back({row.job_id, *tag});
    }
  }

  ~SlurmExecutor() override {
    shut_ = true;
    commands_.join();
  }

  void SetCallbacks(Callbacks cb) override { cb_ = std::move(cb); }

  Status Start(RankId id, int node, const SpawnRequest& request) override {
    GangRequest gang;
    gang.trial = gang.root = id.trial;
    gang.ranks.push_back({node, 0, 0, request});
    GangStarted s = StartGang(gang);
    return s.status;
  }

  GangStarted StartGang(const GangRequest& gang) override {
    if (gang.ranks.empty()) return {0, Status::Internal("a trial with no ranks")};
    Job& job = jobs_[gang.trial];
    job = Job{};
    job.tag = {options_.study, gang.trial, gang.root, gang.attempt};
    job.ranks = static_cast<int>(gang.ranks.size());
    job.dir = gang.trial_dir;
    job.queued_at = Now();
    job.queued_wall = fs::file_time_type::clock::now();
    EnsureTimers();
    SchedulePoll(options_.spec.poll_s);
    for (auto it = orphans_.begin(); it != orphans_.end(); ++it) {
      if (it->tag.root != gang.root) continue;
      // The same configuration is still queued or running from before the restart: follow that
      // job instead of submitting it again. Its files are in its own attempt's folder.
      job.job_id = it->job_id;
      job.adopted_from = it->tag.trial;
      job.dir = (fs::path(gang.trial_dir).parent_path() / TrialFolderName(it->tag.trial)).string();
      orphans_.erase(it);
      OpenFollowers(&job);
      Note(gang.trial,
           StrCat("re-attached to Slurm job ", job.job_id, " of trial ", job.adopted_from,
                  " (still queued or running); its files are in ", job.dir));
      Poll();
      return {job.ranks, Status::Ok()};
    }
    Demand demand;
    for (const GangRequest::Rank& r : gang.ranks) {
      demand.gpus += r.gpus;
      demand.cpus = std::max(demand.cpus, r.cpus);
      if (r.share.any()) demand.share = r.share;
    }
    // A share is one rank on part of one GPU: shards, not a GPU.
    if (demand.share.any()) demand.gpus = 0;
    if (demand.gpus == 0) demand.cpus = std::max(demand.cpus, 1);
    auto shape = ShapeFor(options_.spec, demand);
    if (!shape.ok()) return {0, shape.status()};
    const std::string script_path = gang.trial_dir + "/job.sh";
    {
      std::ofstream script(script_path, std::ios::trunc);
      script << JobScript(gang, options_.self_exe, inherited_);
      if (!script) return {0, Status::Io("cannot write the job's script ", script_path)};
    }
    OpenFollowers(&job);
    std::vector<std::string> argv = {"sbatch"};
    for (std::string& a : SbatchArgs(options_.spec, *shape, job.tag, gang.trial_dir))
      argv.push_back(std::move(a));
    argv.push_back(script_path);
    const int trial = gang.trial;
    const int generation = job.generation = ++generation_;
    Run(std::move(argv), [this, trial, generation](Result<CommandOutput> r) {
      OnSubmitted(trial, generation, std::move(r));
    });
    return {job.ranks, Status::Ok()};
  }

  void Signal(RankId id, int signal) override {
    auto it = jobs_.find(id.trial);
    if (it == jobs_.end() || it->second.ended) return;
    Job& job = it->second;
    if (signal != SIGTERM && signal != SIGKILL && signal != SIGINT) return;
    if (job.cancel_asked) return;  // scancel already ends every rank, and kills after KillWait
    job.cancel_asked = true;
    if (!job.job_id.empty()) Cancel(job.job_id);
  }

  void Shutdown() override {
    if (shut_) return;
    shut_ = true;
    poll_timer_.cancel();
    follow_timer_.cancel();
    // Jobs of an earlier run that this one never took up again (the study stopped first).
    for (const Orphan& o : orphans_) Cancel(o.job_id);
    orphans_.clear();
  }

 private:
  struct Orphan {
    std::string job_id;
    JobTag tag;
  };
  struct Job {
    JobTag tag;
    int ranks = 1;
    int generation = 0;
    std::string job_id;  // empty until sbatch answers
    std::string dir;     // where its script writes (an adopted job's own attempt's folder)
    int adopted_from = 0;
    std::vector<Follower> out, err;  // per rank
    JobState state = JobState::kPending;
    double queued_at = 0;
    fs::file_time_type queued_wall;  // the same moment, as file times count
    std::optional<double> pending_since;
    bool running_seen = false;
    bool cancel_asked = false;
    bool ended = false;
    bool asking_sacct = false;
    int missing = 0;  // consecutive polls that did not show it
    // What slurmstepd said when Slurm ended the job or a step (a preemption, the time limit).
    StepNotice notice = StepNotice::kNone;
    // The script wrote its exit after such a notice: squeue's final state decides, not the file.
    bool exit_deferred = false;
  };

  double Now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  void EnsureTimers() {
    if (timers_on_ || shut_) return;
    timers_on_ = true;
    SchedulePoll(0);
    ScheduleFollow();
  }

  // ---- Slurm's commands, on the command thread ----
  void Run(std::vector<std::string> argv, std::function<void(Result<CommandOutput>)> done) {
    asio::post(commands_, [this, argv = std::move(argv), done = std::move(done)] {
      auto r = std::make_shared<Result<CommandOutput>>(RunCommand(argv, kCommandTimeout));
      asio::post(io_, [this, r, done] {
        if (!shut_) done(std::move(*r));
      });
    });
  }

  void Cancel(const std::string& job_id) {
    // Runs even after Shutdown: the command thread is joined before the executor goes.
    asio::post(commands_, [job_id] { (void)RunCommand({"scancel", job_id}, kCommandTimeout); });
    if (!shut_) SchedulePoll(0.5);
  }

  void OnSubmitted(int trial, int generation, Result<CommandOutput> r) {
    auto it = jobs_.find(trial);
    if (it == jobs_.end() || it->second.generation != generation || it->second.ended) return;
    Job& job = it->second;
    if (!r.ok() || r->exit_code != 0) {
      const std::string why =
          r.ok() ? std::string(Trim(r->err.empty() ? r->out : r->err)) : r.status().message();
      const std::string key = RefusalKey(why);
      std::string where;
      if (const study::SourcePos* pos = options_.spec.Position(key.empty() ? "partition" : key);
          pos && !key.empty())
        where = StrCat(" (", pos->file, ":", pos->line, ":", pos->column, ": ", pos->key, ")");
      const std::string line = StrCat("sbatch refused the job: ", why, where);
      End(&job, key.empty() ? RankExit::NeverStarted() : RankExit::Refused(), line);
      return;
    }
    // --parsable: "<id>" or "<id>;<cluster>".
    std::string id(Trim(r->out));
    id = id.substr(0, id.find(';'));
    if (id.empty() || id.find_first_not_of("0123456789_") != std::string::npos) {
      End(&job, RankExit::NeverStarted(), StrCat("sbatch printed no job id: ", Trim(r->out)));
      return;
    }
    job.job_id = id;
    Note(trial, StrCat("submitted as Slurm job ", id));
    if (job.cancel_asked) Cancel(id);
  }

  // ---- Following the jobs ----
  void SchedulePoll(double after_s) {
    if (shut_) return;
    const auto at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(after_s));
    if (poll_due_ && *poll_due_ <= at) return;
    poll_due_ = at;
    poll_timer_.expires_at(at);
    poll_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || shut_) return;
      poll_due_.reset();
      Poll();
    });
  }

  void Poll() {
    if (shut_) return;
    if (polling_) {
      poll_again_ = true;
      return;
    }
    polling_ = true;
    Run({"squeue", "--noheader", "--states=all", StrCat("--user=", getuid()),
         StrCat("--format=", kSqueueFormat)},
        [this](Result<CommandOutput> r) { OnSqueue(std::move(r)); });
  }

  void OnSqueue(Result<CommandOutput> r) {
    polling_ = false;
    const bool again = poll_again_;
    poll_again_ = false;
    if (!r.ok() || r->exit_code != 0) {
      // slurmctld busy or restarting: nothing is judged from a failed call; try again later.
      const std::string why = r.ok() ? std::string(Trim(r->err)) : r.status().message();
      if (Now() - last_warning_ > 60 || last_warning_ == 0) {
        last_warning_ = Now();
        for (auto& [trial, job] : jobs_)
          if (!job.ended) Note(trial, StrCat("squeue failed (will retry): ", why));
      }
      SchedulePoll(options_.spec.poll_s);
      return;
    }
    std::map<std::string, const SqueueRow*> rows;
    const std::vector<SqueueRow> parsed = ParseSqueue(r->out);
    for (const SqueueRow& row : parsed) rows[row.job_id] = &row;
    bool live = false;
    for (auto& [trial, job] : jobs_) {
      if (job.ended || job.job_id.empty()) {
        live = live || !job.ended;
        continue;
      }
      auto row = rows.find(job.job_id);
      if (row == rows.end()) {
        if (++job.missing >= kMissingPolls) Vanished(&job);
        live = live || !job.ended;
        continue;
      }
      job.missing = 0;
      Update(&job, *row->second);
      live = live || !job.ended;
    }
    if (live || again) SchedulePoll(again ? 0 : options_.spec.poll_s);
  }

  void Update(Job* job, const SqueueRow& row) {
    const JobState before = job->state;
    job->state = row.state;
    const int trial = job->tag.trial;
    if (row.state == JobState::kPending || row.state == JobState::kRequeued) {
      if (job->running_seen && before != JobState::kPending && before != JobState::kRequeued) {
        // Back in the queue after it ran: the cluster requeued it (a preemption, a node failure).
        // It runs again as the same job and resumes from its checkpoint (SLURM_RESTART_COUNT).
        Note(trial, StrCat("Slurm requeued job ", job->job_id, " (", row.reason, ")"));
        job->running_seen = false;
        // The earlier run's exit and notice are not this run's.
        std::error_code ec;
        fs::remove(ExitPath(*job), ec);
        job->notice = StepNotice::kNone;
        job->exit_deferred = false;
        job->queued_at = Now();
        job->queued_wall = fs::file_time_type::clock::now();
      }
      if (!job->pending_since) job->pending_since = Now();
      const PendingKind kind = ClassifyPending(row.reason);
      const double pending = Now() - *job->pending_since;
      if (kind == PendingKind::kNeverClears ||
          (kind == PendingKind::kMayNotClear && pending > options_.spec.pending_limit_s)) {
        job->cancel_asked = true;
        Cancel(job->job_id);
        End(job, RankExit::Refused(),
            StrCat("Slurm will not run job ", job->job_id, ": it is pending for ", row.reason,
                   kind == PendingKind::kMayNotClear
                       ? StrCat(" after ", FormatShort(pending, 3), " s")
                       : std::string(),
                   "; cancelled. Check the partition, the constraint and the resources the study "
                   "asks for (sinfo shows what the nodes have)"));
      }
      return;
    }
    job->pending_since.reset();
    if (!job->running_seen && row.state != JobState::kCancelled &&
        (row.state == JobState::kRunning || row.state == JobState::kCompleting ||
         IsFinal(row.state))) {
      std::string where = row.nodelist;
      if (where.empty() || where == "(null)") where = "Slurm";
      Running(job, where);
    }
    if (IsFinal(row.state)) Finish(job, row.state);
  }

  // The job's end: its output read to the end, then its exit, the code from the file the script
  // wrote when it got that far.
  void Finish(Job* job, JobState state) {
    ReadOutput(job, true);
    std::optional<RankExit> code = ExitFile(*job);
    End(job, ExitFor(state, code, job->notice), "");
  }

  // squeue no longer shows the job (purged after MinJobAge, or squeue never saw it): sacct,
  // where accounting works, then the script's exit file.
  void Vanished(Job* job) {
    if (job->ended) return;
    if (sacct_works_) {
      if (job->asking_sacct) return;
      job->asking_sacct = true;  // judged when sacct answers
      const std::string id = job->job_id;
      const int trial = job->tag.trial;
      Run({"sacct", "--noheader", "--parsable2", "--allocations", StrCat("--jobs=", id),
           StrCat("--format=", kSacctFormat)},
          [this, id, trial](Result<CommandOutput> r) { OnSacct(trial, id, std::move(r)); });
      return;
    }
    ReadOutput(job, true);
    if (auto code = ExitFile(*job))
      return End(job, ExitFor(JobState::kCompleted, code, job->notice), "");
    End(job, RankExit::Lost(),
        StrCat("Slurm job ", job->job_id,
               " left squeue without a final state, and accounting (sacct) is off"));
  }

  void OnSacct(int trial, const std::string& id, Result<CommandOutput> r) {
    auto it = jobs_.find(trial);
    if (it == jobs_.end() || it->second.ended || it->second.job_id != id) return;
    Job& job = it->second;
    if (r.ok() && SacctSaysDisabled(r->out + r->err)) sacct_works_ = false;
    if (r.ok() && r->exit_code == 0) {
      for (const SacctRow& row : ParseSacct(r->out)) {
        if (row.job_id != id || !IsFinal(row.state)) continue;
        std::optional<RankExit> code = DecodeExitCode(row.exit_code);
        if (!code) code = ExitFile(job);
        ReadOutput(&job, true);
        return End(&job, ExitFor(row.state, code, job.notice), "");
      }
    }
    job.asking_sacct = false;
    if (sacct_works_) {
      // sacct does not know it yet (accounting lags): squeue's silence is judged again later.
      job.missing = 0;
      return;
    }
    Vanished(&job);
  }

  // The script's first act: a file naming the host it runs on, written after the job was queued
  // (again: a requeued job writes it anew).
  void StartedFile(Job* job) {
    const std::string path = job->dir + "/slurm-started-" + job->job_id;
    std::error_code ec;
    const auto written = fs::last_write_time(path, ec);
    if (ec || written < job->queued_wall) return;
    std::string host;
    std::ifstream(path) >> host;
    Running(job, host.empty() ? std::string("Slurm") : host);
  }

  void Running(Job* job, const std::string& where) {
    if (job->running_seen) return;
    job->running_seen = true;
    if (cb_.on_running)
      cb_.on_running(job->tag.trial, Now() - job->queued_at,
                     StrCat(where, " (job ", job->job_id, ")"));
  }

  std::string ExitPath(const Job& job) const { return job.dir + "/slurm-exit-" + job.job_id; }

  std::optional<RankExit> ExitFile(const Job& job) const {
    std::ifstream in(ExitPath(job));
    int code = 0;
    if (in >> code) return RankExit::Exited(code);
    return std::nullopt;
  }

  void OpenFollowers(Job* job) {
    job->out.clear();
    job->err.clear();
    for (int r = 0; r < job->ranks; ++r) {
      job->out.emplace_back().path = StrCat(job->dir, "/task-", r, ".out");
      job->err.emplace_back().path = StrCat(job->dir, "/task-", r, ".err");
    }
  }

  void ScheduleFollow() {
    if (shut_) return;
    follow_timer_.expires_after(
        std::chrono::milliseconds(static_cast<int>(kFollowInterval * 1000)));
    follow_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || shut_) return;
      for (auto& [trial, job] : jobs_) {
        if (job.ended) continue;
        // The script's last act is its exit file: every task has ended. Judged now rather than
        // at the next squeue (up to poll_interval later), which would idle the slot meanwhile.
        if (!job.job_id.empty()) {
          if (!job.running_seen) StartedFile(&job);
          if (auto code = ExitFile(job)) {
            ReadOutput(&job, true);
            if (code->ok() || job.notice == StepNotice::kNone) {
              End(&job, *code, "");
              continue;
            }
            // Slurm ended it (a preemption, the time limit): its final state says which, and
            // whether Slurm runs it again (PreemptMode=REQUEUE) or the trial is over.
            if (!job.exit_deferred) {
              job.exit_deferred = true;
              SchedulePoll(0);
            }
            continue;
          }
        }
        ReadOutput(&job, false);
      }
      ScheduleFollow();
    });
  }

  void ReadOutput(Job* job, bool at_end) {
    const int trial = job->tag.trial;
    for (int r = 0; r < job->ranks; ++r) {
      for (int stream = 0; stream < 2; ++stream) {
        std::vector<std::string> lines;
        (stream == 0 ? job->out : job->err)[r].Read(&lines, at_end);
        for (const std::string& line : lines) {
          if (StepNotice notice = ParseStepNotice(line); notice != StepNotice::kNone)
            job->notice = notice;
          if (cb_.on_line) cb_.on_line({trial, r}, stream == 1, line);
        }
      }
    }
  }

  // Every rank of the job ends `how`; `why`, when given, is the last line of rank 0's stderr.
  void End(Job* job, RankExit how, const std::string& why) {
    if (job->ended) return;
    ReadOutput(job, true);
    job->ended = true;
    const int trial = job->tag.trial;
    if (!why.empty() && cb_.on_line) cb_.on_line({trial, 0}, true, why);
    for (int r = 0; r < job->ranks; ++r)
      if (cb_.on_exit) cb_.on_exit({trial, r}, how);
  }

  // A line in rank 0's log about the job (not stderr: it is not the trial's error).
  void Note(int trial, const std::string& text) {
    if (cb_.on_line) cb_.on_line({trial, 0}, false, "# hyperpack: " + text);
  }

  asio::io_context& io_;
  ExecutorOptions options_;
  asio::thread_pool commands_;
  asio::steady_timer poll_timer_;
  asio::steady_timer follow_timer_;
  Clock::time_point start_;
  std::optional<Clock::time_point> poll_due_;
  Callbacks cb_;
  std::vector<std::string> inherited_;
  std::map<int, Job> jobs_;
  std::vector<Orphan> orphans_;
  int generation_ = 0;
  double last_warning_ = 0;
  bool polling_ = false;
  bool poll_again_ = false;
  bool sacct_works_ = true;
  bool timers_on_ = false;
  bool shut_ = false;
};

}  // namespace

std::string JobScript(const GangRequest& gang, const std::string& self_exe,
                      const std::vector<std::string>& inherited_env) {
  const std::map<std::string, std::string> inherited = EnvironmentMap(inherited_env);
  const std::map<std::string, std::string> wanted = EnvironmentMap(gang.ranks[0].request.env);
  std::string s = StrCat("#!/bin/sh\n# hyperpack: trial ", gang.trial, ", attempt ", gang.attempt,
                         " (first attempt: trial ", gang.root, ")\n");
  // What the trial must not inherit from `hyperpack run`'s environment (sbatch passes it on).
  std::vector<std::string> unset;
  for (const auto& [name, value] : inherited)
    if (!wanted.count(name) && ShellName(name) && !SetBySlurmTask(name)) unset.push_back(name);
  if (!unset.empty()) s += StrCat("unset ", Join(unset, " "), "\n");
  for (const auto& [name, value] : wanted) {
    if (SetBySlurmTask(name) || !ShellName(name)) continue;
    auto it = inherited.find(name);
    if (it != inherited.end() && it->second == value) continue;
    s += StrCat("export ", name, "=", ShellQuote(value), "\n");
  }
  const std::string& workdir = gang.ranks[0].request.workdir;
  if (!workdir.empty()) s += StrCat("cd ", ShellQuote(workdir), " || exit 1\n");
  const std::string dir = ShellQuote(gang.trial_dir);
  // A job run again (requeued) must not look finished by its earlier run's exit file.
  s += StrCat("rm -f ", dir, "/slurm-exit-\"$SLURM_JOB_ID\"\n");
  // Its start, seen by the executor sooner than squeue would show it.
  s += StrCat("hostname > ", dir, "/slurm-started-\"$SLURM_JOB_ID\"\n");
  // srun (Slurm 22.05) does not take --cpus-per-task from sbatch's: it is passed on.
  s += StrCat("srun --kill-on-bad-exit=1 --open-mode=append ",
              "${SLURM_CPUS_PER_TASK:+--cpus-per-task=$SLURM_CPUS_PER_TASK} ", "--output=", dir,
              "/task-%t.out --error=", dir, "/task-%t.err ", ShellQuote(self_exe), " slurm-task ",
              ShellQuote(gang.ranks[0].request.command), "\ncode=$?\necho \"$code\" > ", dir,
              "/slurm-exit-\"$SLURM_JOB_ID\"\nexit \"$code\"\n");
  return s;
}

Result<std::vector<SqueueRow>> ListStudyJobs(const std::string& study) {
  HP_ASSIGN_OR_RETURN(CommandOutput r,
                      RunCommand({"squeue", "--noheader", "--states=all",
                                  StrCat("--user=", getuid()), StrCat("--format=", kSqueueFormat)},
                                 kCommandTimeout));
  if (r.exit_code != 0) return Status::Unavailable("squeue failed: ", Trim(r.err + r.out));
  std::vector<SqueueRow> mine;
  const std::string prefix = JobNamePrefix(study);
  for (SqueueRow& row : ParseSqueue(r.out))
    if (row.name.rfind(prefix, 0) == 0) mine.push_back(std::move(row));
  return mine;
}

std::unique_ptr<Executor> MakeSlurmExecutor(asio::io_context& io, ExecutorOptions options) {
  return std::make_unique<SlurmExecutor>(io, std::move(options));
}

}  // namespace hyperpack::scheduler::slurm
