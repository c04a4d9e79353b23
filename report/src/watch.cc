#include "watch.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>
#include <utility>

#include "hyperpack/host.h"
#include "hyperpack/report/report.h"
#include "hyperpack/table.h"
#include "hyperpack/text.h"
#include "json_values.h"
#include "page_data.h"
#include "study_text.h"
#include "study_view.h"

namespace hyperpack::report {
namespace {

using storage::MetricPoint;
using storage::TrialRecord;
using storage::TrialState;
using Json = nlohmann::ordered_json;

// The header's width: the clock is pushed to its right end.
constexpr size_t kHeaderWidth = 76;
// The longest wait between frames that --interval accepts.
constexpr double kMaxIntervalS = 3600;
// How often the loop asks `stop` while it waits: Ctrl-C ends it within this.
constexpr auto kStopSlice = std::chrono::milliseconds(50);
constexpr char kClearScreen[] = "\x1b[H\x1b[2J";

// "0:42", "3:12", "1:02:03": as a clock shows it, narrower in a live table than FormatDuration.
std::string ClockDuration(double seconds) {
  // Clamped: a clock far off (a record from another machine) must not overflow the cast.
  const long s = seconds > 0 ? static_cast<long>(std::min(seconds, 1e12)) : 0;
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  }
  return buf;
}

// "12:03:04" in local time.
std::string ClockTime(double now) {
  const time_t t = static_cast<time_t>(now);
  tm local{};
  localtime_r(&t, &local);
  char buf[16];
  strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

std::string Count(int n, const std::string& one, const std::string& many) {
  return StrCat(n, " ", n == 1 ? one : many);
}

std::vector<const TrialRecord*> Running(const WatchInput& in) {
  std::vector<const TrialRecord*> out;
  for (const TrialRecord& t : in.trials)
    if (t.state == TrialState::kRunning) out.push_back(&t);
  return out;
}

std::optional<double> TrialElapsed(const WatchInput& in, const TrialRecord& t) {
  if (!t.started) return std::nullopt;
  return std::max(0.0, in.now - *t.started);
}

const MetricPoint* LastReport(const WatchInput& in, const TrialRecord& t) {
  auto it = in.last_report.find(t.number);
  return it == in.last_report.end() ? nullptr : &it->second;
}

struct Busy {
  int gpus = 0, cpus = 0, trials = 0;
};

// What the running trials hold, summed from their placements; a trial whose placement was not
// recorded counts as a trial only.
Busy BusyOf(const std::vector<const TrialRecord*>& running) {
  Busy busy;
  for (const TrialRecord* t : running) {
    ++busy.trials;
    for (const storage::RankRecord& r : t->placement) {
      busy.gpus += static_cast<int>(r.gpus.size());
      busy.cpus += r.cpus;
    }
  }
  return busy;
}

// Where a trial runs, a host at a time: "localhost gpus 0,1", "localhost 2 cpus", "localhost" (it
// holds no slot), "node1 gpus 0,1 (2 cpus); node2 gpus 0,1 (2 cpus)", "localhost gpus 1 (25%
// share, 1 cpu)" (a share of a GPU); "-" when it was not recorded.
std::string WhereText(const std::vector<storage::RankRecord>& placement) {
  std::vector<std::pair<std::string, storage::RankRecord>> hosts;  // in order of first use
  for (const storage::RankRecord& r : placement) {
    auto it =
        std::find_if(hosts.begin(), hosts.end(), [&](const auto& h) { return h.first == r.host; });
    if (it == hosts.end())
      it = hosts.insert(hosts.end(), std::make_pair(r.host, storage::RankRecord{}));
    it->second.gpus.insert(it->second.gpus.end(), r.gpus.begin(), r.gpus.end());
    it->second.cpus += r.cpus;
    it->second.gpu_share += r.gpu_share;
  }
  std::vector<std::string> parts;
  for (const auto& [host, use] : hosts) {
    std::vector<std::string> gpus;
    for (int g : use.gpus) gpus.push_back(std::to_string(g));
    std::string part = host;
    if (!gpus.empty()) part += " gpus " + Join(gpus, ",");
    std::vector<std::string> notes;  // in brackets after the GPUs
    if (use.gpu_share > 0) {
      char percent[32];
      std::snprintf(percent, sizeof(percent), "%.3g%% share", use.gpu_share * 100);
      notes.push_back(percent);
    }
    if (use.cpus > 0) {
      const std::string cpus = Count(use.cpus, "cpu", "cpus");
      if (gpus.empty())
        part += " " + cpus;
      else
        notes.push_back(cpus);
    }
    if (!notes.empty()) part += " (" + Join(notes, ", ") + ")";
    parts.push_back(part);
  }
  return parts.empty() ? "-" : Join(parts, "; ");
}

Json PlacementJson(const std::vector<storage::RankRecord>& ranks) {
  if (ranks.empty()) return nullptr;
  Json out = Json::array();
  for (const storage::RankRecord& r : ranks) {
    Json rank = {{"host", r.host}, {"gpus", r.gpus}, {"cpus", r.cpus}};
    if (r.gpu_share > 0) rank["gpu_share"] = r.gpu_share;
    out.push_back(std::move(rank));
  }
  return out;
}

std::string BudgetText(const WatchInput& in) {
  if (!in.spec) return "";
  return StrCat("  [", Tally(in).Finished(), "/", in.spec->budget.max_trials, " of the budget]");
}

}  // namespace

std::string WatchText(const WatchInput& in) {
  std::ostringstream out;
  std::string head = in.study.name + "  " + RunnerStateName(in.state);
  if (auto elapsed = StudyElapsed(in)) head += "  elapsed " + ClockDuration(*elapsed);
  const std::string clock = ClockTime(in.now);
  const size_t used = head.size() + clock.size();
  out << head << std::string(used + 2 < kHeaderWidth ? kHeaderWidth - used : 2, ' ') << clock
      << "\n";
  out << "trials   " << CountsText(CountStates(Tally(in))) << BudgetText(in) << "\n";
  auto ranked = Ranked(in);
  if (ranked.empty()) {
    out << "best     - (no completed trial yet)\n";
  } else {
    const TrialRecord& b = *ranked.front();
    out << "best     " << FormatShort(*b.value, 6) << " (trial " << b.number << ")  "
        << ParamsText(b, in.space()) << "\n";
  }
  const auto running = Running(in);
  const Busy busy = BusyOf(running);
  if (running.empty()) {
    out << "busy     nothing running\n";
    return out.str();
  }
  // Trials without resources hold no slot: only max_parallel bounds them.
  if (busy.gpus == 0 && busy.cpus == 0) {
    out << "busy     " << Count(busy.trials, "trial", "trials") << "\n";
  } else {
    out << "busy     " << Count(busy.gpus, "GPU", "GPUs") << ", "
        << Count(busy.cpus, "CPU slot", "CPU slots") << " ("
        << Count(busy.trials, "trial", "trials") << ")\n";
  }
  Table table({"trial", "running", "attempt", in.study.metric, "step", "on"});
  for (const TrialRecord* t : running) {
    const MetricPoint* last = LastReport(in, *t);
    auto elapsed = TrialElapsed(in, *t);
    table.AddRow({std::to_string(t->number), elapsed ? ClockDuration(*elapsed) : "-",
                  std::to_string(t->attempt), last ? ValueText(last->value) : "-",
                  last ? std::to_string(last->step) : "-", WhereText(t->placement)});
  }
  std::ostringstream rows;
  table.Print(rows);
  std::istringstream lines(rows.str());
  for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
  return out.str();
}

Json WatchJson(const WatchInput& in) {
  Json j;
  j["study"] = in.study.name;
  j["state"] = RunnerStateName(in.state);
  j["metric"] = in.study.metric;
  j["time"] = in.now;
  j["elapsed_s"] = FiniteOrNull<Json>(StudyElapsed(in));
  j["trials"] = CountStates(Tally(in));
  j["max_trials"] = in.spec ? Json(in.spec->budget.max_trials) : Json(nullptr);
  auto ranked = Ranked(in);
  if (ranked.empty()) {
    j["best"] = nullptr;
  } else {
    const TrialRecord& b = *ranked.front();
    j["best"] = {{"trial", b.number},
                 {"value", FiniteOrNull<Json>(b.value)},
                 {"params", ParamsJson(b, in.space())}};
  }
  const auto running = Running(in);
  Json rows = Json::array();
  for (const TrialRecord* t : running) {
    const MetricPoint* last = LastReport(in, *t);
    rows.push_back({{"trial", t->number},
                    {"attempt", t->attempt},
                    {"elapsed_s", FiniteOrNull<Json>(TrialElapsed(in, *t))},
                    {"value", last ? FiniteOrNull<Json>(last->value) : Json(nullptr)},
                    {"step", last ? Json(last->step) : Json(nullptr)},
                    {"placement", PlacementJson(t->placement)}});
  }
  j["running"] = std::move(rows);
  const Busy busy = BusyOf(running);
  j["busy"] = {{"gpus", busy.gpus}, {"cpus", busy.cpus}, {"trials", busy.trials}};
  return j;
}

std::string WatchKey(const WatchInput& in) {
  // The JSON frame without what moves with the clock: one account of what a frame says.
  Json j = WatchJson(in);
  j.erase("time");
  j.erase("elapsed_s");
  for (Json& r : j["running"]) r.erase("elapsed_s");
  return j.dump();
}

bool WatchFinished(const WatchInput& in) { return in.state != RunnerState::kRunning; }

namespace {

// The frame's input as storage holds it now.
Result<WatchInput> LoadWatchInput(storage::Storage& db, const std::string& name, double now) {
  WatchInput in;
  HP_ASSIGN_OR_RETURN(static_cast<StudyView&>(in), ReadStudySummary(db, name, Tolerance{}));
  in.state = RunnerStateOf(in);
  for (const TrialRecord& t : in.trials) {
    if (t.state != TrialState::kRunning) continue;
    HP_ASSIGN_OR_RETURN(auto last, db.LatestMetric(in.study.id, t.number, in.study.metric));
    if (last) in.last_report[t.number] = *last;
  }
  in.now = now;
  return in;
}

// Waits `interval_s`, asking `stop` every slice; true when it said to stop.
bool WaitOrStop(const WatchOptions& options) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(options.interval_s));
  for (;;) {
    if (options.stop && options.stop()) return true;
    const auto left = end - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, kStopSlice));
  }
}

}  // namespace

Status WatchStudy(storage::Storage& db, const std::string& name, const WatchOptions& options,
                  std::ostream& out) {
  if (!(options.interval_s > 0) || options.interval_s > kMaxIntervalS)
    return Status::Invalid("--interval ", options.interval_s,
                           " is out of range; expected seconds in (0, 3600], e.g. 2");
  const bool json = options.format == OutputFormat::kJson;
  std::string last_key;
  for (bool first = true;; first = false) {
    HP_ASSIGN_OR_RETURN(WatchInput in, LoadWatchInput(db, name, WallNow()));
    std::string key = WatchKey(in);
    if (json) {
      if (first || key != last_key) out << WatchJson(in).dump() << "\n";
    } else if (options.redraw) {
      out << kClearScreen << WatchText(in);
    } else if (first || key != last_key) {
      out << (first ? "" : "\n") << WatchText(in);
    }
    last_key = std::move(key);
    out.flush();
    if (!out) return Status::Io("cannot write the view of study '", name, "'");
    if (WatchFinished(in)) return Status::Ok();
    if (WaitOrStop(options)) {
      // Ctrl-C's "^C" then sits on a line of its own; JSON lines in a file stay JSON lines.
      if (!json || options.redraw) out << "\n";
      out.flush();
      return Status::Ok();
    }
  }
}

}  // namespace hyperpack::report
