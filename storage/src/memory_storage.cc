#include "memory_storage.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

#include "transaction.h"

namespace hyperpack::storage {
namespace {

// Everything a store holds. Ids and sequence numbers start at 1, as SQLite's rowids do.
struct Data {
  std::vector<StudyRecord> studies;  // by id
  int64_t next_study_id = 1;
  std::map<std::pair<int64_t, int>, TrialRecord> trials;  // (study, number)
  std::map<std::pair<int64_t, int>, std::vector<MetricPoint>> metrics;
  std::vector<std::pair<int64_t, EventRecord>> events;  // (study, event), in the order added
  std::vector<std::pair<int64_t, JournalEntry>> journal;
  int64_t next_journal_seq = 1;
  std::vector<SubmissionRecord> submissions;  // by id
  int64_t next_submission_id = 1;
  std::vector<std::pair<int64_t, ControlRecord>> controls;  // (study, control), by id
  int64_t next_control_id = 1;
  std::map<int64_t, std::string> tuner_states;  // by study
};

struct Store {
  std::mutex mu;
  Data data;
  const void* leader = nullptr;  // the handle that leads, if one does
};

// The named stores that have a handle open.
std::mutex registry_mu;
std::map<std::string, std::weak_ptr<Store>>& Registry() {
  static auto* registry = new std::map<std::string, std::weak_ptr<Store>>;
  return *registry;
}

class MemoryStorage final : public Storage {
 public:
  MemoryStorage(std::shared_ptr<Store> store, std::string url, bool read_only)
      : store_(std::move(store)), url_(std::move(url)), read_only_(read_only) {}

  ~MemoryStorage() override {
    std::lock_guard<std::mutex> lock(store_->mu);
    if (store_->leader == this) store_->leader = nullptr;
  }

  const std::string& path() const override { return url_; }
  int schema_version() const override { return DefaultMigrations().back().version; }

  Result<bool> TryLead() override {
    std::lock_guard<std::mutex> lock(store_->mu);
    if (!store_->leader) store_->leader = this;
    return store_->leader == this;
  }

  Status Transaction(const std::function<Status()>& body) override {
    // The store's lock is held from the outermost begin to its end; what was there before is put
    // back when the body fails.
    std::unique_lock<std::mutex> lock(store_->mu, std::defer_lock);
    Data before;
    return transaction_.Run(
        body,
        [&] {
          lock.lock();
          before = store_->data;
          return Status::Ok();
        },
        [] { return Status::Ok(); }, [&] { store_->data = std::move(before); });
  }

  Result<StudyRecord> CreateStudy(const StudyRecord& study) override {
    StudyRecord out = study;
    HP_RETURN_IF_ERROR(Write([&](Data& d) -> Status {
      for (const StudyRecord& s : d.studies)
        if (s.name == study.name)
          return Status::AlreadyExists("a study named '", study.name, "' already exists");
      out.id = d.next_study_id++;
      out.runner_pid.reset();
      out.runner_host.clear();
      d.studies.push_back(out);
      return Status::Ok();
    }));
    return out;
  }

  Result<std::optional<StudyRecord>> FindStudy(const std::string& name) override {
    return Read([&](const Data& d) -> Result<std::optional<StudyRecord>> {
      for (const StudyRecord& s : d.studies)
        if (s.name == name) return std::optional<StudyRecord>(s);
      return std::optional<StudyRecord>();
    });
  }

  Result<std::vector<StudyRecord>> ListStudies() override {
    return Read([](const Data& d) -> Result<std::vector<StudyRecord>> { return d.studies; });
  }

  Status SetRunner(int64_t study_id, std::optional<int64_t> pid, const std::string& host) override {
    return Write([&](Data& d) -> Status {
      for (StudyRecord& s : d.studies) {
        if (s.id != study_id) continue;
        s.runner_pid = pid;
        s.runner_host = host;
      }
      return Status::Ok();
    });
  }

  Status InsertTrial(const TrialRecord& trial) override {
    return Write([&](Data& d) -> Status {
      if (!HasStudy(d, trial.study_id))
        return Status::NotFound("no study ", trial.study_id, " to add trial ", trial.number, " to");
      if (!d.trials.emplace(std::make_pair(trial.study_id, trial.number), trial).second)
        return Status::AlreadyExists("trial ", trial.number, " already exists");
      return Status::Ok();
    });
  }

  Status FinishTrial(const TrialRecord& t) override {
    return Write([&](Data& d) -> Status {
      auto it = d.trials.find({t.study_id, t.number});
      if (it == d.trials.end()) return Status::NotFound("no trial ", t.number, " to finish");
      TrialRecord& r = it->second;
      r.state = t.state;
      r.value = t.value;
      r.ended = t.ended;
      r.exit_status = t.exit_status;
      r.error = t.error;
      r.values = t.values;
      return Status::Ok();
    });
  }

  Status ResumeTrial(int64_t study_id, int number,
                     const std::vector<RankRecord>& placement) override {
    return Write([&](Data& d) -> Status {
      auto it = d.trials.find({study_id, number});
      if (it == d.trials.end() || it->second.state != TrialState::kPaused)
        return Status::NotFound("no paused trial ", number);
      TrialRecord& r = it->second;
      r.state = TrialState::kRunning;
      r.ended.reset();
      r.exit_status.reset();
      r.error.clear();
      r.placement = placement;
      return Status::Ok();
    });
  }

  Result<bool> Heartbeat(int64_t study_id, int number, double now) override {
    bool found = false;
    HP_RETURN_IF_ERROR(Write([&](Data& d) -> Status {
      auto it = d.trials.find({study_id, number});
      found = it != d.trials.end() && it->second.state == TrialState::kRunning;
      if (found) it->second.heartbeat = now;
      return Status::Ok();
    }));
    return found;
  }

  Result<std::vector<int>> InterruptUnfinished(int64_t study_id, double now,
                                               const std::string& reason) override {
    std::vector<int> numbers;
    HP_RETURN_IF_ERROR(Write([&](Data& d) -> Status {
      for (auto& [key, r] : d.trials) {
        if (key.first != study_id) continue;
        if (r.state != TrialState::kRunning && r.state != TrialState::kPending) continue;
        numbers.push_back(r.number);
        r.state = TrialState::kInterrupted;
        if (!r.ended) r.ended = now;
        r.error = reason;
      }
      return Status::Ok();
    }));
    return numbers;
  }

  Result<std::vector<TrialRecord>> ListTrials(int64_t study_id) override {
    return Read([&](const Data& d) -> Result<std::vector<TrialRecord>> {
      std::vector<TrialRecord> out;
      for (auto it = d.trials.lower_bound({study_id, INT32_MIN});
           it != d.trials.end() && it->first.first == study_id; ++it)
        out.push_back(it->second);
      return out;
    });
  }

  Result<std::vector<TrialRecord>> ListTrialsIn(int64_t study_id,
                                                std::span<const TrialState> states) override {
    HP_ASSIGN_OR_RETURN(std::vector<TrialRecord> all, ListTrials(study_id));
    std::erase_if(all, [&](const TrialRecord& t) {
      return std::find(states.begin(), states.end(), t.state) == states.end();
    });
    return all;
  }

  Result<std::vector<TrialRecord>> BestTrials(int64_t study_id, Direction direction,
                                              std::optional<double> bound, int limit) override {
    HP_ASSIGN_OR_RETURN(std::vector<TrialRecord> all, ListTrials(study_id));
    const bool max = direction == Direction::kMaximize;
    auto better = [&](double a, double b) { return max ? a > b : a < b; };
    std::erase_if(all, [&](const TrialRecord& t) {
      return t.state != TrialState::kCompleted || !t.value || std::isnan(*t.value) ||
             (bound && better(*bound, *t.value));
    });
    std::stable_sort(all.begin(), all.end(), [&](const TrialRecord& a, const TrialRecord& b) {
      return better(*a.value, *b.value);
    });
    if (limit >= 0 && static_cast<int>(all.size()) > limit) all.resize(limit);
    return all;
  }

  // Transaction holds the store's lock from begin to end: nothing more to hold.
  Status LockStudy(int64_t /*study_id*/) override { return Status::Ok(); }

  Result<TrialTally> TallyTrials(int64_t study_id) override {
    HP_ASSIGN_OR_RETURN(std::vector<TrialRecord> all, ListTrials(study_id));
    return TallyOf(all);
  }

  Result<int> NextTrialNumber(int64_t study_id) override {
    return Read([&](const Data& d) -> Result<int> {
      int next = 0;
      for (const auto& [key, r] : d.trials)
        if (key.first == study_id) next = std::max(next, key.second + 1);
      return next;
    });
  }

  Result<std::string> TunerState(int64_t study_id) override {
    return Read([&](const Data& d) -> Result<std::string> {
      auto it = d.tuner_states.find(study_id);
      return it == d.tuner_states.end() ? std::string() : it->second;
    });
  }

  Status SetTunerState(int64_t study_id, const std::string& state) override {
    return Write([&](Data& d) -> Status {
      d.tuner_states[study_id] = state;
      return Status::Ok();
    });
  }

  Status AddMetrics(int64_t study_id, int trial_number,
                    std::span<const MetricPoint> points) override {
    return Write([&](Data& d) -> Status {
      if (!d.trials.count({study_id, trial_number}))
        return Status::NotFound("no trial ", trial_number, " to add metrics to");
      auto& to = d.metrics[{study_id, trial_number}];
      to.insert(to.end(), points.begin(), points.end());
      return Status::Ok();
    });
  }

  Result<std::vector<MetricPoint>> TrialMetrics(int64_t study_id, int trial_number) override {
    return Read([&](const Data& d) -> Result<std::vector<MetricPoint>> {
      auto it = d.metrics.find({study_id, trial_number});
      return it == d.metrics.end() ? std::vector<MetricPoint>() : it->second;
    });
  }

  Result<std::optional<MetricPoint>> LatestMetric(int64_t study_id, int trial_number,
                                                  const std::string& name) override {
    return Read([&](const Data& d) -> Result<std::optional<MetricPoint>> {
      auto it = d.metrics.find({study_id, trial_number});
      if (it == d.metrics.end()) return std::optional<MetricPoint>();
      for (auto p = it->second.rbegin(); p != it->second.rend(); ++p)
        if (p->name == name) return std::optional<MetricPoint>(*p);
      return std::optional<MetricPoint>();
    });
  }

  Status AddEvent(int64_t study_id, const EventRecord& event) override {
    return Write([&](Data& d) -> Status {
      if (!HasStudy(d, study_id)) return Status::NotFound("no study ", study_id, " for an event");
      d.events.emplace_back(study_id, event);
      return Status::Ok();
    });
  }

  Result<std::vector<EventRecord>> ListEvents(int64_t study_id, int limit) override {
    return Read([&](const Data& d) -> Result<std::vector<EventRecord>> {
      std::vector<EventRecord> out;
      for (auto it = d.events.rbegin();
           it != d.events.rend() && static_cast<int>(out.size()) < limit; ++it)
        if (it->first == study_id) out.push_back(it->second);
      std::reverse(out.begin(), out.end());
      return out;
    });
  }

  Result<std::vector<EventRecord>> ListEventsOfKinds(int64_t study_id,
                                                     std::span<const EventKind> kinds) override {
    return Read([&](const Data& d) -> Result<std::vector<EventRecord>> {
      std::vector<EventRecord> out;
      for (const auto& [study, e] : d.events) {
        if (study != study_id) continue;
        for (EventKind k : kinds)
          if (e.kind == EventKindName(k)) out.push_back(e);
      }
      return out;
    });
  }

  Status AddJournal(int64_t study_id, std::span<const JournalEntry> entries) override {
    return Write([&](Data& d) -> Status {
      if (!HasStudy(d, study_id)) return Status::NotFound("no study ", study_id, " for a journal");
      for (JournalEntry e : entries) {
        e.seq = d.next_journal_seq++;
        d.journal.emplace_back(study_id, e);
      }
      return Status::Ok();
    });
  }

  Result<std::vector<JournalEntry>> ListJournal(int64_t study_id) override {
    return Read([&](const Data& d) -> Result<std::vector<JournalEntry>> {
      std::vector<JournalEntry> out;
      for (const auto& [study, e] : d.journal)
        if (study == study_id) out.push_back(e);
      return out;
    });
  }

  Result<int64_t> AddSubmission(const SubmissionRecord& submission) override {
    int64_t id = 0;
    HP_RETURN_IF_ERROR(Write([&](Data& d) -> Status {
      SubmissionRecord r = submission;
      r.id = id = d.next_submission_id++;
      d.submissions.push_back(std::move(r));
      return Status::Ok();
    }));
    return id;
  }

  Status SetSubmissionState(int64_t id, SubmissionState state, int exit_code,
                            const std::string& message) override {
    return Write([&](Data& d) -> Status {
      for (SubmissionRecord& r : d.submissions) {
        if (r.id != id) continue;
        r.state = state;
        r.exit_code = exit_code;
        r.message = message;
        return Status::Ok();
      }
      return Status::NotFound("no submission ", id);
    });
  }

  Result<std::vector<SubmissionRecord>> ListSubmissions(
      std::vector<SubmissionState> states) override {
    return Read([&](const Data& d) -> Result<std::vector<SubmissionRecord>> {
      std::vector<SubmissionRecord> out;
      for (const SubmissionRecord& r : d.submissions)
        if (states.empty() || std::find(states.begin(), states.end(), r.state) != states.end())
          out.push_back(r);
      return out;
    });
  }

  Result<int64_t> AddControl(int64_t study_id, const ControlRecord& control) override {
    int64_t id = 0;
    HP_RETURN_IF_ERROR(Write([&](Data& d) -> Status {
      if (!HasStudy(d, study_id)) return Status::NotFound("no study ", study_id);
      ControlRecord c = control;
      c.id = id = d.next_control_id++;
      c.applied.reset();
      c.refused = false;
      c.outcome.clear();
      d.controls.emplace_back(study_id, std::move(c));
      return Status::Ok();
    }));
    return id;
  }

  Result<std::vector<ControlRecord>> ListControls(int64_t study_id, bool pending_only) override {
    return Read([&](const Data& d) -> Result<std::vector<ControlRecord>> {
      std::vector<ControlRecord> out;
      for (const auto& [study, c] : d.controls)
        if (study == study_id && (!pending_only || !c.applied)) out.push_back(c);
      return out;
    });
  }

  Status FinishControl(int64_t id, double applied, bool refused,
                       const std::string& outcome) override {
    return Write([&](Data& d) -> Status {
      for (auto& [study, c] : d.controls) {
        if (c.id != id || c.applied) continue;
        c.applied = applied;
        c.refused = refused;
        c.outcome = outcome;
        return Status::Ok();
      }
      return Status::NotFound("no pending control ", id);
    });
  }

  Status DeleteStudy(int64_t study_id) override {
    return Write([&](Data& d) -> Status {
      if (!HasStudy(d, study_id)) return Status::NotFound("no study ", study_id);
      auto of_study = [&](const auto& entry) { return entry.first.first == study_id; };
      std::erase_if(d.trials, of_study);
      std::erase_if(d.metrics, of_study);
      auto tagged = [&](const auto& entry) { return entry.first == study_id; };
      std::erase_if(d.events, tagged);
      std::erase_if(d.journal, tagged);
      std::erase_if(d.controls, tagged);
      d.tuner_states.erase(study_id);
      std::erase_if(d.studies, [&](const StudyRecord& s) { return s.id == study_id; });
      return Status::Ok();
    });
  }

 private:
  static bool HasStudy(const Data& d, int64_t id) {
    return std::any_of(d.studies.begin(), d.studies.end(),
                       [&](const StudyRecord& s) { return s.id == id; });
  }

  // `change` in a transaction of its own, or in the one open; refused on a read-only handle.
  template <typename F>
  Status Write(F change) {
    if (read_only_) return Status::Io("cannot write ", url_, ": it was opened read-only");
    return Transaction([&] { return change(store_->data); });
  }

  // `read` under the store's lock (already held inside a transaction).
  template <typename F>
  std::invoke_result_t<F, const Data&> Read(F read) {
    if (transaction_.open()) return read(static_cast<const Data&>(store_->data));
    std::lock_guard<std::mutex> lock(store_->mu);
    return read(static_cast<const Data&>(store_->data));
  }

  std::shared_ptr<Store> store_;
  std::string url_;
  bool read_only_;
  TransactionDepth transaction_;  // the outermost holds the store's lock
};

}  // namespace

Result<std::unique_ptr<Storage>> OpenMemory(const std::string& name, const std::string& url,
                                            const Storage::Options& options) {
  std::shared_ptr<Store> store;
  if (!name.empty()) {
    std::lock_guard<std::mutex> lock(registry_mu);
    std::weak_ptr<Store>& slot = Registry()[name];
    store = slot.lock();
    if (!store && options.read_only) {
      Registry().erase(name);
      return Status::NotFound("no store at ", url, " in this process");
    }
    if (!store) slot = store = std::make_shared<Store>();
  } else {
    if (options.read_only)
      return Status::NotFound("a fresh memory: store is empty; nothing to read");
    store = std::make_shared<Store>();
  }
  return std::unique_ptr<Storage>(new MemoryStorage(std::move(store), url, options.read_only));
}

}  // namespace hyperpack::storage
