// What hyperpack decides about Slurm jobs: pure functions over text and values (slurm_policy.h).
#include "slurm_policy.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

#include "hyperpack/env_vars.h"
#include "hyperpack/text.h"

namespace hyperpack::scheduler::slurm {

namespace {

// scontrol refuses more than this many hosts in one range; so do we, before allocating them.
constexpr int64_t kMaxHosts = 1'000'000;
constexpr int kPortBase = 10000;
constexpr int kPortSpan = 50000;

bool IsDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// Digits only: no sign, no spaces (ParseInt takes a '+' and a '-', which no Slurm number has).
std::optional<int64_t> ParseCount(std::string_view s) {
  if (!IsDigits(s)) return std::nullopt;
  int64_t x = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return x;
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool Contains(std::string_view haystack, std::string_view upper_needle) {
  return Upper(haystack).find(upper_needle) != std::string::npos;
}

// Splits at `sep`, keeping empty pieces.
std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t at = s.find(sep, start);
    if (at == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, at - start));
    start = at + 1;
  }
}

// Splits at `sep` outside brackets: "a[1,2],b" -> "a[1,2]", "b".
std::vector<std::string_view> SplitTopLevel(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    if (s[i] == ']') --depth;
    if (s[i] == sep && depth == 0) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  for (std::string_view line : Split(text, '\n')) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!Trim(line).empty()) out.push_back(line);
  }
  return out;
}

// The numbers inside one bracket group, "01-03,7" -> "01" "02" "03" "7": each range padded to the
// width its start was written with, as scontrol does.
Result<std::vector<std::string>> ExpandBracket(std::string_view body, std::string_view whole) {
  std::vector<std::string> out;
  for (std::string_view item : Split(body, ',')) {
    item = Trim(item);
    size_t dash = item.find('-');
    std::string_view lo_text = dash == std::string_view::npos ? item : item.substr(0, dash);
    std::string_view hi_text = dash == std::string_view::npos ? item : item.substr(dash + 1);
    auto lo = ParseCount(lo_text);
    auto hi = ParseCount(hi_text);
    if (!lo || !hi)
      return Status::Invalid("host list '", std::string(whole), "': '", std::string(item),
                             "' is not a number or a range like 01-03");
    if (*hi < *lo)
      return Status::Invalid("host list '", std::string(whole), "': range '", std::string(item),
                             "' ends below its start");
    if (*hi - *lo + 1 > kMaxHosts - static_cast<int64_t>(out.size()))
      return Status::Invalid("host list '", std::string(whole), "': more than ", kMaxHosts,
                             " hosts");
    for (int64_t n = *lo; n <= *hi; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < lo_text.size()) digits.insert(0, lo_text.size() - digits.size(), '0');
      out.push_back(std::move(digits));
    }
  }
  return out;
}

// One host expression, "a[1-2]b[3-4]" -> a1b3 a1b4 a2b3 a2b4 (the first group varies slowest).
Result<std::vector<std::string>> ExpandHost(std::string_view host, std::string_view whole) {
  std::vector<std::string> out = {""};
  size_t i = 0;
  while (i < host.size()) {
    if (host[i] == ']')
      return Status::Invalid("host list '", std::string(whole), "': ']' without '['");
    if (host[i] != '[') {
      size_t next = host.find_first_of("[]", i);
      if (next == std::string_view::npos) next = host.size();
      for (std::string& prefix : out) prefix.append(host.substr(i, next - i));
      i = next;
      continue;
    }
    size_t close = host.find(']', i + 1);
    size_t nested = host.find('[', i + 1);
    if (close == std::string_view::npos || (nested != std::string_view::npos && nested < close))
      return Status::Invalid("host list '", std::string(whole), "': unbalanced '['");
    HP_ASSIGN_OR_RETURN(std::vector<std::string> numbers,
                        ExpandBracket(host.substr(i + 1, close - i - 1), whole));
    if (static_cast<int64_t>(out.size()) * static_cast<int64_t>(numbers.size()) > kMaxHosts)
      return Status::Invalid("host list '", std::string(whole), "': more than ", kMaxHosts,
                             " hosts");
    std::vector<std::string> product;
    product.reserve(out.size() * numbers.size());
    for (const std::string& prefix : out)
      for (const std::string& n : numbers) product.push_back(prefix + n);
    out = std::move(product);
    i = close + 1;
  }
  return out;
}

// Slurm job names and squeue columns cannot hold these; the comment keeps them, percent-encoded.
bool NeedsEncoding(unsigned char c) { return c <= ' ' || c == 0x7f || c == '=' || c == '%'; }

std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (!NeedsEncoding(c)) {
      out.push_back(ch);
      continue;
    }
    out.push_back('%');
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xf]);
  }
  return out;
}

std::optional<std::string> PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2])))
      return std::nullopt;
    int value = 0;
    std::from_chars(s.data() + i + 1, s.data() + i + 3, value, 16);
    out.push_back(static_cast<char>(value));
    i += 2;
  }
  return out;
}

std::string NameSafe(const std::string& study) {
  std::string out = study;
  for (char& c : out)
    if (c == ':' || std::isspace(static_cast<unsigned char>(c))) c = '_';
  return out;
}

void AddIfSet(std::vector<std::string>& args, const char* flag, const std::string& value) {
  if (!value.empty()) args.push_back(StrCat(flag, value));
}

Result<std::string> Need(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || Trim(it->second).empty())
    return Status::Invalid(name, " is not set: not inside a Slurm job step?");
  return std::string(Trim(it->second));
}

Result<int64_t> NeedCount(const std::map<std::string, std::string>& env, const char* name) {
  HP_ASSIGN_OR_RETURN(std::string text, Need(env, name));
  auto n = ParseCount(text);
  if (!n) return Status::Invalid(name, "='", text, "': expected a non-negative integer");
  return *n;
}

// SLURM_TASKS_PER_NODE, "2(x3),1" -> 2 2 2 1.
Result<std::vector<int64_t>> ExpandTasksPerNode(std::string_view text) {
  auto bad = [&] {
    return Status::Invalid("SLURM_TASKS_PER_NODE='", std::string(text),
                           "': expected counts like 2(x3),1");
  };
  std::vector<int64_t> out;
  for (std::string_view item : Split(text, ',')) {
    item = Trim(item);
    int64_t repeat = 1;
    size_t paren = item.find('(');
    if (paren != std::string_view::npos) {
      std::string_view times = item.substr(paren);
      if (times.size() < 4 || times.substr(0, 2) != "(x" || times.back() != ')') return bad();
      auto r = ParseCount(times.substr(2, times.size() - 3));
      if (!r || *r < 1 || *r > kMaxHosts) return bad();
      repeat = *r;
      item = item.substr(0, paren);
    }
    auto count = ParseCount(item);
    if (!count || *count < 1) return bad();
    if (static_cast<int64_t>(out.size()) + repeat > kMaxHosts) return bad();
    out.insert(out.end(), static_cast<size_t>(repeat), *count);
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> ExpandHostList(std::string_view list) {
  std::string_view trimmed = Trim(list);
  std::vector<std::string> out;
  // squeue prints "(null)" for a job that holds no nodes yet: no hosts, not a host named so.
  if (trimmed.empty() || trimmed == "(null)") return out;
  for (std::string_view host : SplitTopLevel(trimmed, ',')) {
    host = Trim(host);
    if (host.empty())
      return Status::Invalid("host list '", std::string(list), "': an empty host name");
    HP_ASSIGN_OR_RETURN(std::vector<std::string> hosts, ExpandHost(host, list));
    if (static_cast<int64_t>(out.size() + hosts.size()) > kMaxHosts)
      return Status::Invalid("host list '", std::string(list), "': more than ", kMaxHosts,
                             " hosts");
    for (std::string& h : hosts) out.push_back(std::move(h));
  }
  return out;
}

Result<int> ShardsFor(const study::SlurmSpec& spec, const GpuShare& share) {
  const int n = spec.gpu_shards;
  if (n <= 0)
    return Status::Invalid(
        "a share of a GPU (resources.gpu_memory, or gpus below 1) runs on Slurm through its "
        "shard gres; set cluster.slurm.gpu_shards to the shards each GPU has in the cluster's "
        "gres.conf (Name=shard Count=...), or give whole gpus");
  if (share.memory_mb > 0 && spec.gpu_memory_mb <= 0)
    return Status::Invalid(
        "a share of a GPU's memory (resources.gpu_memory) becomes Slurm shards in proportion to "
        "each GPU's memory on the partition; set cluster.slurm.gpu_memory (e.g. 80GiB)");
  if (share.memory_mb > spec.gpu_memory_mb && share.memory_mb > 0)
    return Status::Invalid("a share of ", share.memory_mb, " MiB is more than a GPU's ",
                           spec.gpu_memory_mb, " MiB (cluster.slurm.gpu_memory)");
  // Whole shards, rounded up: a share never gets less than it asked for.
  int64_t by_milli = (static_cast<int64_t>(share.milli) * n + 999) / 1000;
  int64_t by_memory =
      share.memory_mb > 0 ? (share.memory_mb * n + spec.gpu_memory_mb - 1) / spec.gpu_memory_mb : 0;
  return static_cast<int>(std::clamp<int64_t>(std::max(by_milli, by_memory), 1, n));
}

Result<JobShape> ShapeFor(const study::SlurmSpec& spec, const Demand& demand) {
  JobShape shape;
  if (demand.share.any()) {
    HP_ASSIGN_OR_RETURN(shape.shards, ShardsFor(spec, demand.share));
    shape.cpus_per_task = spec.cpus_per_task;
    return shape;
  }
  if (demand.gpus <= 0) {
    shape.cpus_per_task = std::max(1, demand.cpus);
    return shape;
  }
  if (spec.gpus_per_node < 0)
    return Status::Invalid("cluster.slurm.gpus_per_node must be >= 0 (got ", spec.gpus_per_node,
                           ")");
  const int g = demand.gpus;
  shape.cpus_per_task = spec.cpus_per_task;
  if (spec.gpus_per_node == 0 || spec.gpus_per_node >= g) {
    shape.tasks_per_node = g;
    shape.gpus_per_node = g;
    return shape;
  }
  // A gang wider than a node fills whole nodes: a partial node would leave its GPUs to jobs that
  // share the node with a rank of ours.
  if (g % spec.gpus_per_node != 0)
    return Status::Invalid("a trial of ", g, " GPUs does not fill whole nodes of ",
                           spec.gpus_per_node,
                           " (cluster.slurm.gpus_per_node); ask for a multiple of ",
                           spec.gpus_per_node, " GPUs or at most ", spec.gpus_per_node);
  shape.nodes = g / spec.gpus_per_node;
  shape.tasks_per_node = spec.gpus_per_node;
  shape.gpus_per_node = spec.gpus_per_node;
  return shape;
}

std::string JobName(const JobTag& tag) { return StrCat(JobNamePrefix(tag.study), tag.trial); }

std::string JobNamePrefix(const std::string& study) { return StrCat("hp:", NameSafe(study), ":"); }

std::string JobComment(const JobTag& tag) {
  return StrCat("hyperpack study=", PercentEncode(tag.study), " trial=", tag.trial,
                " root=", tag.root, " attempt=", tag.attempt);
}

std::optional<JobTag> ParseJobComment(std::string_view comment) {
  std::vector<std::string_view> words = Split(Trim(comment), ' ');
  if (words.empty() || words[0] != "hyperpack") return std::nullopt;
  JobTag tag;
  bool has_study = false;
  bool has_trial = false;
  bool has_root = false;
  bool has_attempt = false;
  for (size_t i = 1; i < words.size(); ++i) {
    std::string_view word = words[i];
    if (word.empty()) continue;
    size_t eq = word.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::string_view key = word.substr(0, eq);
    std::string_view value = word.substr(eq + 1);
    if (key == "study") {
      auto study = PercentDecode(value);
      if (!study) return std::nullopt;
      tag.study = std::move(*study);
      has_study = true;
      continue;
    }
    // Keys a later version adds are not ours to judge.
    if (key != "trial" && key != "root" && key != "attempt") continue;
    auto n = ParseCount(value);
    if (!n || *n > std::numeric_limits<int>::max()) return std::nullopt;
    int v = static_cast<int>(*n);
    if (key == "trial") {
      tag.trial = v;
      has_trial = true;
    } else if (key == "root") {
      tag.root = v;
      has_root = true;
    } else {
      tag.attempt = v;
      has_attempt = true;
    }
  }
  if (!has_study || !has_trial || !has_root || !has_attempt) return std::nullopt;
  return tag;
}

std::vector<std::string> SbatchArgs(const study::SlurmSpec& spec, const JobShape& shape,
                                    const JobTag& tag, const std::string& log_dir) {
  std::vector<std::string> args = {
      "--parsable",
      StrCat("--job-name=", JobName(tag)),
      StrCat("--comment=", JobComment(tag)),
      StrCat("--nodes=", shape.nodes),
      StrCat("--ntasks-per-node=", shape.tasks_per_node),
  };
  if (shape.gpus_per_node > 0)
    args.push_back(spec.gres ? StrCat("--gres=gpu:", shape.gpus_per_node)
                             : StrCat("--gpus-per-node=", shape.gpus_per_node));
  if (shape.shards > 0) args.push_back(StrCat("--gres=shard:", shape.shards));
  if (shape.cpus_per_task > 0) args.push_back(StrCat("--cpus-per-task=", shape.cpus_per_task));
  AddIfSet(args, "--mem=", spec.mem);
  AddIfSet(args, "--partition=", spec.partition);
  AddIfSet(args, "--account=", spec.account);
  AddIfSet(args, "--qos=", spec.qos);
  AddIfSet(args, "--constraint=", spec.constraint);
  if (spec.time_limit_s) {
    // --time=0 is no limit at all: a limit under a minute asks for one minute.
    auto minutes = static_cast<int64_t>(std::ceil(*spec.time_limit_s / 60.0));
    args.push_back(StrCat("--time=", std::max<int64_t>(1, minutes)));
  }
  AddIfSet(args, "--signal=", spec.signal);
  const std::string log = StrCat(log_dir, "/slurm-%j.out");
  args.push_back(StrCat("--output=", log));
  args.push_back(StrCat("--error=", log));
  args.push_back("--open-mode=append");
  args.push_back("--requeue");
  for (const std::string& extra : spec.extra_args) args.push_back(extra);
  return args;
}

JobState ParseJobState(std::string_view text) {
  text = Trim(text);
  size_t space = text.find(' ');
  if (space != std::string_view::npos) text = text.substr(0, space);
  while (!text.empty() && text.back() == '+') text.remove_suffix(1);
  struct Name {
    const char* full;
    const char* code;
    JobState state;
  };
  static constexpr Name kNames[] = {
      {"PENDING", "PD", JobState::kPending},
      {"CONFIGURING", "CF", JobState::kConfiguring},
      {"RUNNING", "R", JobState::kRunning},
      {"COMPLETING", "CG", JobState::kCompleting},
      {"SUSPENDED", "S", JobState::kSuspended},
      {"REQUEUED", "RQ", JobState::kRequeued},
      {"REQUEUE_HOLD", "RH", JobState::kRequeued},
      {"REQUEUE_FED", "RF", JobState::kRequeued},
      {"COMPLETED", "CD", JobState::kCompleted},
      {"FAILED", "F", JobState::kFailed},
      {"CANCELLED", "CA", JobState::kCancelled},
      {"TIMEOUT", "TO", JobState::kTimeout},
      {"NODE_FAIL", "NF", JobState::kNodeFail},
      {"PREEMPTED", "PR", JobState::kPreempted},
      {"OUT_OF_MEMORY", "OOM", JobState::kOutOfMemory},
      {"BOOT_FAIL", "BF", JobState::kBootFail},
      {"DEADLINE", "DL", JobState::kDeadline},
  };
  const std::string upper = Upper(text);
  for (const Name& n : kNames)
    if (upper == n.full || upper == n.code) return n.state;
  return JobState::kUnknown;
}

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kPending:
      return "PENDING";
    case JobState::kConfiguring:
      return "CONFIGURING";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kCompleting:
      return "COMPLETING";
    case JobState::kSuspended:
      return "SUSPENDED";
    case JobState::kRequeued:
      return "REQUEUED";
    case JobState::kCompleted:
      return "COMPLETED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kCancelled:
      return "CANCELLED";
    case JobState::kTimeout:
      return "TIMEOUT";
    case JobState::kNodeFail:
      return "NODE_FAIL";
    case JobState::kPreempted:
      return "PREEMPTED";
    case JobState::kOutOfMemory:
      return "OUT_OF_MEMORY";
    case JobState::kBootFail:
      return "BOOT_FAIL";
    case JobState::kDeadline:
      return "DEADLINE";
    case JobState::kUnknown:
      return "UNKNOWN";
  }
  return "UNKNOWN";
}

bool IsFinal(JobState s) {
  switch (s) {
    case JobState::kCompleted:
    case JobState::kFailed:
    case JobState::kCancelled:
    case JobState::kTimeout:
    case JobState::kNodeFail:
    case JobState::kPreempted:
    case JobState::kOutOfMemory:
    case JobState::kBootFail:
    case JobState::kDeadline:
      return true;
    default:
      return false;
  }
}

std::vector<SqueueRow> ParseSqueue(std::string_view text) {
  std::vector<SqueueRow> rows;
  for (std::string_view line : Lines(text)) {
    // The first five '|' separate fields; the comment keeps any that follow.
    std::string_view f[6];
    size_t start = 0;
    bool complete = true;
    for (int i = 0; i < 5; ++i) {
      size_t bar = line.find('|', start);
      if (bar == std::string_view::npos) {
        complete = false;
        break;
      }
      f[i] = line.substr(start, bar - start);
      start = bar + 1;
    }
    if (!complete) continue;
    f[5] = line.substr(start);
    SqueueRow row;
    row.job_id = std::string(Trim(f[0]));
    if (row.job_id.empty()) continue;
    row.name = std::string(f[1]);
    row.state = ParseJobState(f[2]);
    row.reason = std::string(Trim(f[3]));
    row.nodelist = std::string(Trim(f[4]));
    row.comment = std::string(f[5]);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<SacctRow> ParseSacct(std::string_view text) {
  std::vector<SacctRow> rows;
  for (std::string_view line : Lines(text)) {
    std::vector<std::string_view> f = Split(line, '|');
    if (f.size() != 3 || Trim(f[0]).empty()) continue;
    rows.push_back({std::string(Trim(f[0])), ParseJobState(f[1]), std::string(Trim(f[2]))});
  }
  return rows;
}

bool SacctSaysDisabled(std::string_view output) {
  return Contains(output, "ACCOUNTING STORAGE IS DISABLED");
}

std::optional<RankExit> DecodeExitCode(std::string_view exit_code) {
  exit_code = Trim(exit_code);
  size_t colon = exit_code.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto code = ParseCount(exit_code.substr(0, colon));
  auto signal = ParseCount(exit_code.substr(colon + 1));
  if (!code || !signal || *code > 255 || *signal > 255) return std::nullopt;
  // A signal is what ended it; the exit half is then whatever was left in the status.
  if (*signal != 0) return RankExit::Signaled(static_cast<int>(*signal));
  return RankExit::Exited(static_cast<int>(*code));
}

RankExit ExitFor(JobState final_state, const std::optional<RankExit>& exit_code,
                 StepNotice notice) {
  const bool own_end = final_state == JobState::kCompleted || final_state == JobState::kFailed ||
                       final_state == JobState::kCancelled;
  const bool succeeded = final_state == JobState::kCompleted && (!exit_code || exit_code->ok());
  if (own_end && !succeeded) {
    switch (notice) {
      case StepNotice::kPreemption:
        return RankExit::Preempted();
      case StepNotice::kTimeLimit:
        return RankExit::TimedOut();
      case StepNotice::kNodeFailure:
      case StepNotice::kRequeue:
        return RankExit::Lost();
      case StepNotice::kNone:
        break;
    }
  }
  switch (final_state) {
    case JobState::kCompleted:
      return exit_code.value_or(RankExit::Exited(0));
    case JobState::kFailed:
      // Slurm says FAILED with 0:0 when the job never reached its script (an unwritable output
      // file): that is not a success.
      if (!exit_code || exit_code->ok()) return RankExit::Exited(1);
      return *exit_code;
    case JobState::kTimeout:
    case JobState::kDeadline:
      return RankExit::TimedOut();
    case JobState::kPreempted:
      return RankExit::Preempted();
    case JobState::kNodeFail:
    case JobState::kBootFail:
      return RankExit::Lost();
    case JobState::kOutOfMemory:
      return RankExit::Signaled(9);
    case JobState::kCancelled:
      return RankExit::Signaled(15);
    default:
      // Not a final state: the caller lost track of the job; its trial runs again.
      return RankExit::Lost();
  }
}

StepNotice ParseStepNotice(std::string_view line) {
  const size_t open = line.find("*** ");
  if (open == std::string_view::npos) return StepNotice::kNone;
  std::string_view rest = line.substr(open + 4);
  if (rest.substr(0, 4) != "JOB " && rest.substr(0, 5) != "STEP ") return StepNotice::kNone;
  if (rest.find(" CANCELLED AT ") == std::string_view::npos) return StepNotice::kNone;
  static constexpr std::pair<std::string_view, StepNotice> kWhy[] = {
      {" DUE TO PREEMPTION", StepNotice::kPreemption},
      {" DUE TO TIME LIMIT", StepNotice::kTimeLimit},
      {" DUE TO NODE ", StepNotice::kNodeFailure},
      {" DUE TO JOB REQUEUE", StepNotice::kRequeue},
  };
  for (const auto& [text, notice] : kWhy)
    if (rest.find(text) != std::string_view::npos) return notice;
  return StepNotice::kNone;
}

PendingKind ClassifyPending(std::string_view reason) {
  reason = Trim(reason);
  if (reason.size() >= 2 && reason.front() == '(' && reason.back() == ')')
    reason = Trim(reason.substr(1, reason.size() - 2));
  static constexpr std::string_view kNeverClears[] = {
      "PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints",
      "InvalidAccount",  "InvalidQOS",         "AccountNotAllowed",  "QOSNotAllowed",
  };
  for (std::string_view never : kNeverClears)
    if (reason == never) return PendingKind::kNeverClears;
  if (reason.starts_with("ReqNodeNotAvail")) return PendingKind::kMayNotClear;
  return PendingKind::kWaits;
}

std::string RefusalKey(std::string_view sbatch_error) {
  struct Refusal {
    const char* upper_text;
    const char* key;
  };
  static constexpr Refusal kRefusals[] = {
      {"INVALID PARTITION", "partition"},
      {"INVALID ACCOUNT", "account"},
      {"INVALID QOS", "qos"},
      {"REQUESTED NODE CONFIGURATION IS NOT AVAILABLE", "resources"},
      {"INVALID FEATURE SPECIFICATION", "constraint"},
      {"REQUESTED TIME LIMIT IS INVALID", "time_limit"},
  };
  const std::string upper = Upper(sbatch_error);
  for (const Refusal& r : kRefusals)
    if (upper.find(r.upper_text) != std::string::npos) return r.key;
  return "";
}

Result<std::map<std::string, std::string>> TorchrunFromSlurm(
    const std::map<std::string, std::string>& env) {
  HP_ASSIGN_OR_RETURN(int64_t rank, NeedCount(env, "SLURM_PROCID"));
  HP_ASSIGN_OR_RETURN(int64_t world, NeedCount(env, "SLURM_NTASKS"));
  HP_ASSIGN_OR_RETURN(int64_t local_rank, NeedCount(env, "SLURM_LOCALID"));
  if (rank >= world)
    return Status::Invalid("SLURM_PROCID=", rank, " is not below SLURM_NTASKS=", world);

  int64_t local_world = 0;
  if (env.count("SLURM_NTASKS_PER_NODE")) {
    HP_ASSIGN_OR_RETURN(local_world, NeedCount(env, "SLURM_NTASKS_PER_NODE"));
  } else {
    HP_ASSIGN_OR_RETURN(std::string per_node, Need(env, "SLURM_TASKS_PER_NODE"));
    HP_ASSIGN_OR_RETURN(std::vector<int64_t> counts, ExpandTasksPerNode(per_node));
    HP_ASSIGN_OR_RETURN(int64_t node, NeedCount(env, "SLURM_NODEID"));
    if (node >= static_cast<int64_t>(counts.size()))
      return Status::Invalid("SLURM_NODEID=", node, " is beyond SLURM_TASKS_PER_NODE='", per_node,
                             "' (", counts.size(), " nodes)");
    local_world = counts[static_cast<size_t>(node)];
  }
  if (local_rank >= local_world)
    return Status::Invalid("SLURM_LOCALID=", local_rank, " is not below the node's ", local_world,
                           " tasks");

  HP_ASSIGN_OR_RETURN(std::string nodelist, Need(env, "SLURM_JOB_NODELIST"));
  auto hosts = ExpandHostList(nodelist);
  if (!hosts.ok()) return hosts.status().WithContext("SLURM_JOB_NODELIST");
  if (hosts->empty()) return Status::Invalid("SLURM_JOB_NODELIST='", nodelist, "' names no host");

  std::map<std::string, std::string> out;
  out[env::kRank] = std::to_string(rank);
  out[env::kWorldSize] = std::to_string(world);
  out[env::kLocalRank] = std::to_string(local_rank);
  out[env::kLocalWorldSize] = std::to_string(local_world);
  out[env::kMasterAddr] = hosts->front();

  auto preset_port = env.find(env::kMasterPort);
  if (preset_port == env.end() || Trim(preset_port->second).empty()) {
    // Every task of the job derives the same port without talking to the others.
    HP_ASSIGN_OR_RETURN(int64_t job_id, NeedCount(env, "SLURM_JOB_ID"));
    out[env::kMasterPort] = std::to_string(kPortBase + job_id % kPortSpan);
  }

  auto restarts = env.find("SLURM_RESTART_COUNT");
  if (restarts != env.end()) {
    HP_ASSIGN_OR_RETURN(int64_t count, NeedCount(env, "SLURM_RESTART_COUNT"));
    if (count > 0) out.emplace(env::kResume, "1");
  }

  auto devices = env.find(env::kCudaVisibleDevices);
  if (devices != env.end() && local_world > 1) {
    std::vector<std::string_view> list = Split(devices->second, ',');
    if (static_cast<int64_t>(list.size()) == local_world)
      out[env::kCudaVisibleDevices] = std::string(Trim(list[static_cast<size_t>(local_rank)]));
  }
  return out;
}

std::string ShellQuote(std::string_view value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'')
      out += "'\\''";
    else
      out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

}  // namespace hyperpack::scheduler::slurm
