#include "cli.h"

namespace hyperpack::cli {

namespace {

namespace sched = hyperpack::scheduler;

// simulate's flags: --trace replays a workload, --generate writes one.
void AddSimulateOptions(cxxopts::Options& o) {
  o.custom_help(
      "--trace FILE.csv [--cluster 64x8] [--policy best-fit] [--order fifo|sjf] [--aging 1] "
      "[--max-wait 2h | --guard-factor 6] [--critical-first] [--estimate-noise 0] [--json] | "
      "--generate tuning|shared "
      "--jobs N [--seed "
      "S] -o FILE.csv");
  o.add_options()("trace", "the workload to replay", cxxopts::value<std::string>())(
      "cluster", "NODESxGPUS", cxxopts::value<std::string>()->default_value("64x8"))(
      "policy", "best-fit | first-fit | fifo",
      cxxopts::value<std::string>()->default_value("best-fit"))(
      "order", "the queue: fifo (arrival) | sjf (shortest predicted first, with aging)",
      cxxopts::value<std::string>()->default_value("fifo"))(
      "aging", "sjf: seconds of predicted run time forgiven per second waited",
      cxxopts::value<double>()->default_value("1"))(
      "max-wait",
      "sjf: a job that has waited this long (e.g. 2h) goes to the head of the queue; 0: never",
      cxxopts::value<std::string>()->default_value("0"))(
      "guard-factor",
      "sjf without --max-wait: a job that has waited this many times the typical predicted run "
      "time goes to the head (hyperpack run's default is 6); 0: never",
      cxxopts::value<double>()->default_value("0"))(
      "critical-first",
      "sjf: a job that would end after all the work in hand even if it started now goes to the "
      "head (hyperpack run's default)")(
      "estimate-noise",
      "the sd of log(estimate / duration): how wrong the scheduler's estimates are (--seed draws "
      "them)",
      cxxopts::value<double>()->default_value("0"))("json", "print one JSON object")(
      "generate", "write a synthetic workload: tuning | shared", cxxopts::value<std::string>())(
      "jobs", "jobs to generate", cxxopts::value<int>()->default_value("2000"))(
      "seed", "generator seed", cxxopts::value<uint64_t>()->default_value("1"))(
      "o,output", "where --generate writes (default: standard output)",
      cxxopts::value<std::string>());
}

// --generate: a synthetic workload as CSV, to --output or standard output.
int GenerateWorkload(const cxxopts::ParseResult& args) {
  std::string kind = args["generate"].as<std::string>();
  int jobs = args["jobs"].as<int>();
  if (jobs < 1) return Fail(Status::Invalid("--jobs must be >= 1"));
  uint64_t seed = args["seed"].as<uint64_t>();
  std::vector<sched::TraceJob> w;
  if (kind == "tuning") {
    w = sched::TuningWorkload(jobs, seed);
  } else if (kind == "shared") {
    w = sched::SharedClusterWorkload(jobs, seed);
  } else {
    return Fail(Status::Invalid("--generate: '", kind, "'; expected tuning or shared"));
  }
  std::string csv = sched::TraceCsv(w);
  if (!args.count("output")) {
    std::cout << csv;
    return kOk;
  }
  std::ofstream out(args["output"].as<std::string>());
  out << csv;
  return out.good() ? kOk : Fail(Status::Io("cannot write ", args["output"].as<std::string>()));
}

// The cluster (--cluster NODESxGPUS) and the policy (--policy) to replay the workload on.
hyperpack::Result<sched::SimulationOptions> SimulationOptionsFrom(
    const cxxopts::ParseResult& args) {
  sched::SimulationOptions so;
  std::string cluster = args["cluster"].as<std::string>();
  auto x = cluster.find('x');
  auto nodes = x == std::string::npos ? std::nullopt : hyperpack::ParseInt(cluster.substr(0, x));
  auto gpus = x == std::string::npos ? std::nullopt : hyperpack::ParseInt(cluster.substr(x + 1));
  if (!nodes || !gpus || *nodes < 1 || *gpus < 1 || *gpus > 64)
    return Status::Invalid("--cluster: '", cluster, "'; expected NODESxGPUS such as 64x8");
  so.nodes = static_cast<int>(*nodes);
  so.gpus_per_node = static_cast<int>(*gpus);
  auto policy = sched::ParsePolicy(args["policy"].as<std::string>());
  if (!policy.ok()) return policy.status().WithContext("--policy");
  so.policy = *policy;
  auto order = sched::ParseOrder(args["order"].as<std::string>());
  if (!order.ok()) return order.status().WithContext("--order");
  so.queue.order = *order;
  so.queue.aging = args["aging"].as<double>();
  if (!(so.queue.aging >= 0) || !std::isfinite(so.queue.aging))
    return Status::Invalid("--aging: ", so.queue.aging, "; expected a number >= 0, e.g. 1");
  if (std::string w = args["max-wait"].as<std::string>(); w != "0") {
    auto max_wait = hyperpack::ParseDuration(w);
    if (!max_wait.ok()) return max_wait.status().WithContext("--max-wait");
    so.queue.max_wait = *max_wait;
  }
  so.queue.max_wait_factor = args["guard-factor"].as<double>();
  if (!(so.queue.max_wait_factor >= 0) || !std::isfinite(so.queue.max_wait_factor))
    return Status::Invalid("--guard-factor: ", so.queue.max_wait_factor,
                           "; expected a number >= 0, e.g. 6 (0: no guard)");
  so.queue.critical_first = args.count("critical-first") > 0;
  so.estimate_noise = args["estimate-noise"].as<double>();
  if (!(so.estimate_noise >= 0) || so.estimate_noise > 10)
    return Status::Invalid("--estimate-noise: ", so.estimate_noise,
                           "; expected a standard deviation of log error in [0, 10], e.g. 0.5");
  so.noise_seed = args["seed"].as<uint64_t>();
  return so;
}

}  // namespace

int CmdSimulate(int argc, char** argv) {
  cxxopts::Options o(
      "simulate",
      "hyperpack simulate: replay a workload (CSV: submit_time,duration,gpus) in "
      "virtual time through the scheduler's placement code, or write a synthetic one");
  AddSimulateOptions(o);
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 0, 0)) return *rc;
  if (args.count("generate")) return GenerateWorkload(args);
  if (!args.count("trace")) return Fail(Status::Invalid("give --trace FILE.csv or --generate"));
  const std::string path = args["trace"].as<std::string>();
  auto text = ReadFileText(path, "the trace");
  if (!text.ok()) return Fail(text.status());
  auto trace = sched::ParseTrace(*text, path);
  if (!trace.ok()) return Fail(trace.status());
  auto so = SimulationOptionsFrom(args);
  if (!so.ok()) return Fail(so.status());
  so->clock_ms = [] {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  auto r = sched::Simulate(*trace, *so);
  if (!r.ok()) return Fail(r.status());
  std::cout << (args.count("json") ? sched::SimulationJson(*r, *so) + "\n"
                                   : sched::SimulationText(*r, *so));
  return kOk;
}

}  // namespace hyperpack::cli
