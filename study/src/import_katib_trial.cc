// The Katib importer's trial: the trial template's job and container as the trial section's
// command and env, Katib's metadata substitution, and the metrics collector as metrics_from,
// metrics_path and metric patterns.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hyperpack/text.h"
#include "import_common.h"
#include "import_katib.h"

namespace hyperpack::study::internal::katib {
namespace {

namespace fs = std::filesystem;

std::optional<Collector> LookupCollector(const std::string& name) {
  static const std::map<std::string, Collector> kTable = {
      {"StdOut", Collector::kStdOut},
      {"File", Collector::kFile},
      {"TensorFlowEvent", Collector::kTensorFlowEvent},
      {"PrometheusMetric", Collector::kElsewhere},
      {"Custom", Collector::kElsewhere},
      {"None", Collector::kElsewhere},
  };
  auto it = kTable.find(name);
  if (it == kTable.end()) return std::nullopt;
  return it->second;
}

std::optional<JobKind> LookupJobKind(const std::string& kind) {
  using L = JobKind::Layout;
  static const std::map<std::string, JobKind> kTable = {
      {"Job", {L::kJob, nullptr, {nullptr, nullptr, nullptr}}},
      {"PyTorchJob", {L::kReplicas, "pytorchReplicaSpecs", {"Master", "Worker", nullptr}}},
      {"TFJob", {L::kReplicas, "tfReplicaSpecs", {"Chief", "Master", "Worker"}}},
      {"XGBoostJob", {L::kReplicas, "xgbReplicaSpecs", {"Master", "Worker", nullptr}}},
      {"MPIJob", {L::kReplicas, "mpiReplicaSpecs", {"Launcher", nullptr, nullptr}}},
      {"PaddleJob", {L::kReplicas, "paddleReplicaSpecs", {"Master", "Worker", nullptr}}},
      {"JAXJob", {L::kReplicas, "jaxReplicaSpecs", {"Worker", nullptr, nullptr}}},
      {"TrainJob", {L::kTrainer, nullptr, {nullptr, nullptr, nullptr}}},
  };
  auto it = kTable.find(kind);
  if (it == kTable.end()) return std::nullopt;
  return it->second;
}

// fileSystemPath.format: how a File collector's lines are written (TEXT, Katib's default, or JSON).
enum class FileFormat { kText, kJson };
FileFormat FileFormatOf(const YAML::Node& path) {
  const YAML::Node f = Get(path, "format");
  return f && f.IsScalar() && f.Scalar() == "JSON" ? FileFormat::kJson : FileFormat::kText;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A word of a container's command as the shell reads it: single-quoted when it has spaces.
std::string ShellWord(const std::string& w) {
  bool plain = !w.empty() && std::none_of(w.begin(), w.end(), [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) || c == '\'' || c == '"';
  });
  if (plain) return w;
  std::string quoted = "'";
  for (char c : w) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// `text` with every character a regular expression gives a meaning escaped.
std::string RegexLiteral(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') out += '\\';
    out += c;
  }
  return out;
}

// The index of the ']' that closes the character class opening at `open`.
size_t ClassEnd(const std::string& re, size_t open) {
  size_t j = open + 1;
  if (j < re.size() && re[j] == '^') ++j;
  if (j < re.size() && re[j] == ']') ++j;  // a leading ']' is literal
  while (j < re.size() && re[j] != ']') j += re[j] == '\\' ? 2 : 1;
  return std::min(j, re.size() - 1);
}

// The index of the ')' that closes the group opening at `open`, past escapes and classes; npos
// when it is not closed.
size_t GroupEnd(const std::string& re, size_t open) {
  int depth = 0;
  for (size_t i = open; i < re.size(); ++i) {
    if (re[i] == '\\') {
      ++i;
    } else if (re[i] == '[') {
      i = ClassEnd(re, i);
    } else if (re[i] == '(') {
      ++depth;
    } else if (re[i] == ')' && --depth == 0) {
      return i;
    }
  }
  return std::string::npos;
}

// A Katib metricsFormat filter, whose first group captures a metric's name and second its value,
// as a pattern for the metric `name` alone: the first group becomes the name itself, the second
// stays the one capture group, every other group is made non-capturing. A name group at the start
// may not begin inside a longer name (train_loss is not loss), as Katib's leftmost match ensures.
std::optional<std::string> FilterForMetric(const std::string& filter, const std::string& name) {
  std::string out;
  int captures = 0;
  for (size_t i = 0; i < filter.size(); ++i) {
    const char c = filter[i];
    if (c == '\\' || c == '[') {  // copied whole: an escape, or a class
      const size_t end = c == '[' ? ClassEnd(filter, i) : std::min(i + 1, filter.size() - 1);
      out += filter.substr(i, end - i + 1);
      i = end;
      continue;
    }
    if (c != '(' || (i + 1 < filter.size() && filter[i + 1] == '?')) {
      out += c;
      continue;
    }
    if (++captures == 1) {
      const size_t end = GroupEnd(filter, i);
      if (end == std::string::npos) return std::nullopt;
      out += (i == 0 ? "(?<![\\w|-])(?:" : "(?:") + RegexLiteral(name) + ")";
      i = end;
      continue;
    }
    out += captures == 2 ? "(" : "(?:";
  }
  if (captures < 2) return std::nullopt;
  return out;
}

}  // namespace

void KatibImporter::TrialTemplate(const YAML::Node& tt, const YAML::Node& spec) {
  if (!tt || !tt.IsMap()) {
    Error(tt ? tt : spec, "spec.trialTemplate",
          "an Experiment needs trialTemplate: {trialParameters, trialSpec}");
    return;
  }
  // Kubernetes plumbing: which container Katib watches and how it tells that the trial's job
  // finished or failed; hyperpack runs the command and reads its exit status.
  static const std::vector<std::string> kPlumbing = {
      "primaryContainerName", "successCondition", "failureCondition", "primaryPodLabels", "retain"};
  for (auto it = tt.begin(); it != tt.end(); ++it) {
    std::string key = it->first.Scalar();
    if (key != "trialParameters" && key != "trialSpec" && !Among(kPlumbing, key))
      Warn(it->first, "spec.trialTemplate." + key, key, " is not carried over");
  }
  const YAML::Node trial_spec = tt["trialSpec"];
  if (!trial_spec || !trial_spec.IsMap()) {
    Error(trial_spec ? trial_spec : tt, "spec.trialTemplate.trialSpec",
          "the trial template must be written inline as trialSpec (a Job or a training job); "
          "a ConfigMap template is not carried over");
    return;
  }
  const std::map<std::string, std::string> placeholders = Placeholders(tt, trial_spec);
  std::string kind = Word(Get(trial_spec, "kind"));
  if (kind.empty()) kind = "Job";
  kind_name_ = kind;
  const std::optional<JobKind> job = LookupJobKind(kind);
  if (!job) {
    Error(Get(trial_spec, "kind"), "spec.trialTemplate.trialSpec.kind", "a trial of kind ", kind,
          " is not carried over (hyperpack imports a batch Job, a Kubeflow training job "
          "(PyTorchJob, TFJob, XGBoostJob, MPIJob, PaddleJob, JAXJob) or a TrainJob)");
    return;
  }
  YAML::Node containers;
  std::string where;
  if (!Replicas(trial_spec, *job, &containers, &where)) return;
  if (!containers || !containers.IsSequence() || containers.size() == 0) {
    Error(trial_spec, "spec.trialTemplate.trialSpec", "no containers found under ", where);
    return;
  }
  // The container Katib watches (primaryContainerName), else the first.
  size_t chosen = 0;
  const std::string primary = Word(Get(tt, "primaryContainerName"));
  for (size_t i = 0; i < containers.size(); ++i)
    if (!primary.empty() && Word(Get(containers[i], "name")) == primary) chosen = i;
  Container(containers[chosen], placeholders);
}

std::map<std::string, std::string> KatibImporter::Placeholders(const YAML::Node& tt,
                                                               const YAML::Node& trial_spec) {
  std::map<std::string, std::string> placeholders;
  const YAML::Node tps = tt["trialParameters"];
  if (!tps || !tps.IsSequence()) return placeholders;
  for (const YAML::Node& tp : tps) {
    const YAML::Node name = Get(tp, "name"), ref = Get(tp, "reference");
    if (Word(name).empty() || Word(ref).empty()) {
      Error(tp, "spec.trialTemplate.trialParameters", "expected {name, reference}");
      continue;
    }
    std::string r = ref.Scalar();
    if (std::optional<std::string> meta = Metadata(r, trial_spec)) {
      placeholders[name.Scalar()] = *meta;
    } else if (auto it = names_.find(r); it != names_.end()) {
      placeholders[name.Scalar()] = "{" + it->second + "}";
    } else {
      Error(ref, "spec.trialTemplate.trialParameters", "reference '", r,
            "' is not a parameter of spec.parameters");
    }
  }
  return placeholders;
}

bool KatibImporter::Replicas(const YAML::Node& trial_spec, const JobKind& job,
                             YAML::Node* containers, std::string* where) {
  const YAML::Node spec = Get(trial_spec, "spec");
  if (job.layout == JobKind::Layout::kJob) {
    *where = "spec.template.spec.containers";
    *containers = Get(spec, "template", "spec", "containers");
    return true;
  }
  if (job.layout == JobKind::Layout::kTrainer) return Trainer(spec, containers, where);
  const YAML::Node roles = Get(spec, job.replicas);
  std::string chosen;
  for (const char* role : job.roles)
    if (role && chosen.empty() && Get(roles, role)) chosen = role;
  if (chosen.empty()) {
    Error(roles ? roles : trial_spec, "spec.trialTemplate.trialSpec", "no ", job.roles[0],
          " replica under spec.", job.replicas);
    return false;
  }
  *where = StrCat("spec.", job.replicas, ".", chosen, ".template.spec.containers");
  *containers = Get(roles, chosen.c_str(), "template", "spec", "containers");
  for (auto it = roles.begin(); it != roles.end(); ++it) {
    if (it->first.Scalar() == chosen) continue;
    const YAML::Node n = Get(it->second, "replicas");
    Warn(it->second, "spec.trialTemplate.trialSpec", "the ", kind_name_, "'s ", it->first.Scalar(),
         " replicas are not carried over: the ", chosen, "'s command runs as one process",
         n && IsWholeNumber(n)
             ? StrCat("; with ", n.Scalar(), " ", Lower(it->first.Scalar()), "s the gang would be ",
                      *ParseInt(n.Scalar()) + 1, " ranks (resources: {gpus: N} runs a gang of N)")
             : "");
  }
  return true;
}

bool KatibImporter::Trainer(const YAML::Node& spec, YAML::Node* containers, std::string* where) {
  const YAML::Node trainer = Get(spec, "trainer");
  *where = "spec.trainer";
  if (trainer) {
    YAML::Node list(YAML::NodeType::Sequence);
    list.push_back(trainer);
    *containers = list;
  }
  if (const YAML::Node n = Get(trainer, "numNodes"); n && IsWholeNumber(n) && n.Scalar() != "1")
    Warn(n, "spec.trialTemplate.trialSpec.spec.trainer.numNodes",
         "the trainer runs here as one process, not on ", n.Scalar(),
         " nodes (resources: {gpus: N} runs a gang of N ranks)");
  return true;
}

std::optional<std::string> KatibImporter::Metadata(const std::string& ref,
                                                   const YAML::Node& trial_spec) const {
  auto literal = [](const std::string& v) { return TemplateLiteral(v); };
  if (ref == "${trialSpec.Name}") return "{trial}";
  if (ref == "${trialSpec.Namespace}") return literal(namespace_.empty() ? "default" : namespace_);
  if (ref == "${trialSpec.Kind}") return literal(Word(Get(trial_spec, "kind")));
  if (ref == "${trialSpec.APIVersion}") return literal(Word(Get(trial_spec, "apiVersion")));
  static constexpr std::pair<const char*, const char*> kMaps[] = {{"Labels", "labels"},
                                                                  {"Annotations", "annotations"}};
  for (const auto& [map, field] : kMaps) {
    const std::string open = StrCat("${trialSpec.", map, "[");
    if (ref.rfind(open, 0) != 0 || ref.size() < open.size() + 2 ||
        ref.compare(ref.size() - 2, 2, "]}") != 0)
      continue;
    const std::string key = ref.substr(open.size(), ref.size() - open.size() - 2);
    const YAML::Node values = Get(trial_spec, "metadata", field);
    const YAML::Node v = values && values.IsMap() ? values[key] : YAML::Node();
    return literal(v && v.IsScalar() ? v.Scalar() : "");
  }
  return std::nullopt;
}

std::optional<std::string> KatibImporter::Substitute(
    const YAML::Node& at, const std::string& word,
    const std::map<std::string, std::string>& placeholders) {
  static const std::string kOpen = "${trialParameters.";
  std::string out;
  for (size_t i = 0; i < word.size();) {
    if (word.compare(i, kOpen.size(), kOpen) == 0) {
      size_t end = word.find('}', i);
      std::string name = word.substr(i + kOpen.size(), end - i - kOpen.size());
      auto it = placeholders.find(name);
      if (end == std::string::npos || it == placeholders.end()) {
        Error(at, "spec.trialTemplate", "${trialParameters.", name,
              "} names no trialParameters entry");
        return std::nullopt;
      }
      out += it->second;
      i = end + 1;
      continue;
    }
    char ch = word[i++];
    out += ch == '{' ? "{{" : ch == '}' ? "}}" : std::string(1, ch);
  }
  return out;
}

void KatibImporter::Container(const YAML::Node& c,
                              const std::map<std::string, std::string>& placeholders) {
  if (!CommandGiven("the container's command and args") && !ContainerCommand(c, placeholders))
    return;
  ContainerRest(c, placeholders);
}

bool KatibImporter::ContainerCommand(const YAML::Node& c,
                                     const std::map<std::string, std::string>& placeholders) {
  if (!Get(c, "command") && Get(c, "args")) {
    Error(Get(c, "args"), "spec.trialTemplate.args",
          "the container gives args but no command: Kubernetes runs them with its image's "
          "entrypoint, which hyperpack cannot see; name the program with --command '...' "
          "(placeholders such as {lr} for the parameters)");
    return false;
  }
  std::vector<std::string> words;
  bool ok = true;
  for (const char* field : {"command", "args"}) {
    const YAML::Node list = Get(c, field);
    if (!list) continue;
    if (!list.IsSequence()) {
      Error(list, StrCat("spec.trialTemplate.", field), "expected a list of words");
      return false;
    }
    for (const YAML::Node& w : list) {
      std::optional<std::string> s =
          w.IsScalar() ? Substitute(w, ShellWord(w.Scalar()), placeholders) : std::nullopt;
      if (!w.IsScalar()) Error(w, StrCat("spec.trialTemplate.", field), "expected a word");
      if (s) words.push_back(*s);
      ok = ok && s.has_value();
    }
  }
  if (!ok) return false;
  const YAML::Node at = Get(c, "command") ? Get(c, "command") : Get(c, "args");
  if (words.empty()) {
    Error(c, "spec.trialTemplate", "the trial container has no command or args");
    return false;
  }
  yaml_ << "trial:\n  command: " << nlohmann::json(Join(words, " ")).dump()
        << "   # trialTemplate container command and args, " << From(at) << "\n";
  return true;
}

void KatibImporter::ContainerRest(const YAML::Node& c,
                                  const std::map<std::string, std::string>& placeholders) {
  if (const YAML::Node env = Get(c, "env"); env && env.IsSequence()) {
    std::vector<std::string> vars;
    for (const YAML::Node& e : env) {
      if (Word(Get(e, "name")).empty() || !Get(e, "value") || !Get(e, "value").IsScalar()) {
        Warn(e, "spec.trialTemplate.env",
             "an env entry without a value (valueFrom) is not "
             "carried over");
        continue;
      }
      if (auto v = Substitute(e["value"], e["value"].Scalar(), placeholders))
        vars.push_back(e["name"].Scalar() + ": " + nlohmann::json(*v).dump());
    }
    if (!vars.empty())
      yaml_ << "  env: {" << Join(vars, ", ") << "}   # container env, " << From(env) << "\n";
  }
  for (const std::string& line : trial_lines_) yaml_ << line << "\n";
  if (const YAML::Node image = Get(c, "image"))
    Warn(image, "spec.trialTemplate.image",
         "hyperpack runs the command on this host, not "
         "in the image ",
         Word(image), ": install what it needs here");
  for (auto it = c.begin(); it != c.end(); ++it) {
    std::string key = it->first.Scalar();
    if (!Among({"name", "image", "command", "args", "env"}, key))
      Warn(it->first, "spec.trialTemplate." + key, "the container's ", key,
           " is Kubernetes' own: not carried over");
  }
  Warn(Get(c, "command") ? Get(c, "command") : (Get(c, "args") ? Get(c, "args") : c),
       "spec.trialTemplate",
       "hyperpack reads metrics from the program's output as name=value or JSON lines; "
       "Katib's StdOut collector reads name=value too, so a program that prints them so works "
       "unchanged");
}

void KatibImporter::MetricsCollector(const YAML::Node& mc) {
  if (!mc) {
    trial_lines_.push_back("  metrics_from: output   # Katib's StdOut collector, its default");
    return;
  }
  const YAML::Node kind = Get(mc, "collector", "kind");
  std::string k = kind && kind.IsScalar() ? kind.Scalar() : "StdOut";
  std::optional<Collector> collector = LookupCollector(k);
  if (!collector) {
    Error(kind, "spec.metricsCollectorSpec.collector.kind", "'", k,
          "' is not a Katib metrics collector");
    return;
  }
  if (*collector == Collector::kElsewhere)
    Warn(kind, "spec.metricsCollectorSpec.collector.kind", "the ", k,
         " collector is not carried over: hyperpack reads metrics from the program's standard "
         "output; the program must print them there");
  if (*collector == Collector::kStdOut)
    trial_lines_.push_back(
        StrCat("  metrics_from: output   # Katib's StdOut collector, ", From(kind ? kind : mc)));
  const YAML::Node path = Get(mc, "source", "fileSystemPath");
  if (*collector == Collector::kFile || *collector == Collector::kTensorFlowEvent) {
    if (!FollowedPath(path, *collector)) return;
  } else if (path) {
    Warn(path, "spec.metricsCollectorSpec.source.fileSystemPath",
         "fileSystemPath is not carried over");
  }
  if (const YAML::Node formats = Get(mc, "source", "filter", "metricsFormat"))
    MetricsFormat(formats);
  else if (*collector == Collector::kFile && FileFormatOf(path) == FileFormat::kJson)
    JsonMetrics();
}

bool KatibImporter::FollowedPath(const YAML::Node& path, Collector collector) {
  const std::string key = "spec.metricsCollectorSpec.source.fileSystemPath";
  const std::string p = Word(Get(path, "path"));
  if (p.empty()) {
    Error(path ? path : YAML::Node(), key, "the collector needs fileSystemPath.path: the ",
          collector == Collector::kFile ? "file" : "folder", " the trial writes its metrics to");
    return false;
  }
  const std::string escaped = TemplateLiteral(p);
  trial_lines_.push_back(StrCat(
      "  metrics_from: ", collector == Collector::kFile ? "file" : "tensorboard", "   # Katib's ",
      collector == Collector::kFile ? "File" : "TensorFlowEvent", " collector, ", From(path)));
  trial_lines_.push_back(StrCat("  metrics_path: ", nlohmann::json(escaped).dump()));
  Warn(Get(path, "path"), key + ".path", "the trial writes its metrics to ", p,
       ", a path in Katib's container: on this host it must be writable (or give the program "
       "and metrics_path another, such as {trial_dir}/",
       fs::path(p).filename().string(), ")");
  return true;
}

void KatibImporter::JsonMetrics() {
  trial_lines_.push_back("  metrics:   # Katib's JSON format: values as numbers or strings");
  for (const std::string& name : metric_names_)
    trial_lines_.push_back(StrCat(
        "    ", nlohmann::json(SafeMetric(name)).dump(), ": ",
        nlohmann::json(StrCat("\"", RegexLiteral(name), "\"\\s*:\\s*\"?([-+0-9.eE]+)")).dump()));
}

void KatibImporter::MetricsFormat(const YAML::Node& formats) {
  const std::string key = "spec.metricsCollectorSpec.source.filter.metricsFormat";
  if (!formats.IsSequence() || formats.size() == 0 || !formats[0].IsScalar()) {
    Error(formats, key, "expected a list of regular expressions");
    return;
  }
  if (formats.size() > 1)
    Warn(formats[1], key,
         "only the first filter is carried over (hyperpack reads a metric "
         "with one pattern)");
  std::vector<std::string> lines;
  for (const std::string& name : metric_names_) {
    std::optional<std::string> pattern = FilterForMetric(formats[0].Scalar(), name);
    if (!pattern) {
      Error(formats[0], key, "'", formats[0].Scalar(),
            "' is not a filter of two groups, the metric's name and then its value");
      return;
    }
    lines.push_back(StrCat("    ", nlohmann::json(SafeMetric(name)).dump(), ": ",
                           nlohmann::json(*pattern).dump()));
  }
  trial_lines_.push_back(StrCat("  metrics:   # metricsFormat, ", From(formats)));
  trial_lines_.insert(trial_lines_.end(), lines.begin(), lines.end());
}

}  // namespace hyperpack::study::internal::katib
