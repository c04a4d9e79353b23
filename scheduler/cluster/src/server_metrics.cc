// hyperpack serve's Prometheus metrics (server_metrics.h).
#include "server_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <exception>

#include "hyperpack/text.h"

namespace hyperpack::scheduler {

struct ServerMetrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<prometheus::Exposer> exposer;
  prometheus::Gauge* studies_queued = nullptr;
  prometheus::Gauge* studies_running = nullptr;
  prometheus::Gauge* agents = nullptr;
  prometheus::Counter* agents_lost = nullptr;
  prometheus::Gauge* gpus = nullptr;
  prometheus::Gauge* gpus_busy = nullptr;
  prometheus::Gauge* cpus = nullptr;
  prometheus::Gauge* cpus_busy = nullptr;
  struct Trials {
    prometheus::Gauge *running, *waiting, *paused, *completed, *pruned, *failed, *infeasible;
  } trials{};
  prometheus::Histogram* proposal = nullptr;
};

namespace {

prometheus::Gauge* OneGauge(prometheus::Registry& r, const std::string& name,
                            const std::string& help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

Result<std::unique_ptr<ServerMetrics>> ServerMetrics::Start(const std::string& listen) {
  auto host_port = SplitHostPort(listen);
  if (!host_port.ok() || host_port->first.empty())
    return Status::Invalid("--metrics ", listen, ": expected ADDRESS:PORT, e.g. 127.0.0.1:9464");
  auto impl = std::make_unique<Impl>();
  prometheus::Registry& r = *impl->registry;
  impl->studies_queued =
      OneGauge(r, "hyperpack_studies_queued", "Submitted studies waiting for the one running");
  impl->studies_running = OneGauge(r, "hyperpack_studies_running", "studies running now");
  impl->agents = OneGauge(r, "hyperpack_agents", "Agents connected now");
  impl->agents_lost = &prometheus::BuildCounter()
                           .Name("hyperpack_agents_lost_total")
                           .Help("Agents lost (silent or disconnected) since the server started")
                           .Register(r)
                           .Add({});
  impl->gpus = OneGauge(r, "hyperpack_gpus", "GPUs on the agents' nodes up now");
  impl->gpus_busy = OneGauge(r, "hyperpack_gpus_busy", "GPUs a trial's rank holds");
  impl->cpus = OneGauge(r, "hyperpack_cpu_slots", "CPU slots on the agents' nodes up now");
  impl->cpus_busy = OneGauge(r, "hyperpack_cpu_slots_busy", "CPU slots a trial's rank holds");
  auto& trials = prometheus::BuildGauge()
                     .Name("hyperpack_trials")
                     .Help("The running study's trials by state")
                     .Register(r);
  impl->trials = {&trials.Add({{"state", "running"}}),   &trials.Add({{"state", "waiting"}}),
                  &trials.Add({{"state", "paused"}}),    &trials.Add({{"state", "completed"}}),
                  &trials.Add({{"state", "pruned"}}),    &trials.Add({{"state", "failed"}}),
                  &trials.Add({{"state", "infeasible"}})};
  // From a millisecond (random search, a small GP) to a minute (a GP over thousands of trials).
  impl->proposal = &prometheus::BuildHistogram()
                        .Name("hyperpack_proposal_seconds")
                        .Help("How long the tuner took to propose configurations")
                        .Register(r)
                        .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.005, 0.01, 0.05,
                                                                         0.1, 0.5, 1, 5, 10, 60});
  std::string bound;
  try {
    impl->exposer = std::make_unique<prometheus::Exposer>(listen, 1);
    impl->exposer->RegisterCollectable(impl->registry);
    const std::vector<int> ports = impl->exposer->GetListeningPorts();
    if (ports.empty()) return Status::Io("--metrics ", listen, ": not listening");
    bound = StrCat(host_port->first, ":", ports.front());
  } catch (const std::exception& e) {
    return Status::Io("--metrics ", listen, ": cannot listen there (", e.what(),
                      "); expected a free port on an address of this machine, e.g. ",
                      "127.0.0.1:9464");
  }
  return std::unique_ptr<ServerMetrics>(new ServerMetrics(std::move(impl), bound));
}

ServerMetrics::ServerMetrics(std::unique_ptr<Impl> impl, std::string address)
    : impl_(std::move(impl)), address_(std::move(address)) {}

ServerMetrics::~ServerMetrics() = default;

void ServerMetrics::Set(const Sample& s) {
  impl_->studies_queued->Set(s.studies_queued);
  impl_->studies_running->Set(s.studies_running);
  impl_->agents->Set(s.agents);
  impl_->gpus->Set(s.run.gpus);
  impl_->gpus_busy->Set(s.run.gpus_busy);
  impl_->cpus->Set(s.run.cpus);
  impl_->cpus_busy->Set(s.run.cpus_busy);
  Impl::Trials& t = impl_->trials;
  t.running->Set(s.run.running);
  t.waiting->Set(s.run.waiting);
  t.paused->Set(s.run.paused);
  t.completed->Set(s.run.completed);
  t.pruned->Set(s.run.pruned);
  t.failed->Set(s.run.failed);
  t.infeasible->Set(s.run.infeasible);
}

void ServerMetrics::AgentLost() { impl_->agents_lost->Increment(); }

void ServerMetrics::Proposed(double seconds) { impl_->proposal->Observe(seconds); }

}  // namespace hyperpack::scheduler
