// RunSlurmStudy: the local driver with a Slurm executor, after sbatch --test-only has accepted
// the request; RunSlurmTask: what each task of a job runs.
#include <signal.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "command.h"
#include "hyperpack/scheduler/process.h"
#include "hyperpack/scheduler/slurm.h"
#include "hyperpack/scheduler/study_run.h"
#include "hyperpack/text.h"
#include "slurm_executor.h"
#include "slurm_policy.h"

namespace hyperpack::scheduler {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

// Slurm places the trials; the controller is given one node wide enough that only max_parallel
// and the budget limit how many are in flight (and a request no node can hold is Slurm's to
// refuse, by name, at submission).
constexpr int kSlurmSlots = 4096;

std::string SelfExe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("hyperpack") : p.string();
}

// A demand to try: resources that name no parameter, or one GPU / one CPU.
// The smallest share the study's resources can ask for: one shard, with memory where they name it.
GpuShare ProbeShare(const study::StudySpec& spec) {
  const bool memory = spec.resources.gpu_memory || spec.resources.gpu_memory_auto;
  return GpuShare{memory ? 1 : 0, 1};
}

slurm::Demand ProbeDemand(const study::StudySpec& spec) {
  slurm::Demand d;
  if (spec.resources.SharesGpu()) {
    d.share = ProbeShare(spec);
  } else if (spec.resources.gpus) {
    auto v = spec.resources.gpus->Evaluate(Config{});
    d.gpus = v.ok() ? std::max(1, static_cast<int>(*v)) : 1;
  } else {
    d.cpus = 1;
    if (spec.resources.cpus) {
      auto v = spec.resources.cpus->Evaluate(Config{});
      if (v.ok()) d.cpus = std::max(1, static_cast<int>(*v));
    }
  }
  return d;
}

// sbatch --test-only with the study's request: a partition, account, QoS, constraint or node
// configuration Slurm refuses is an error before anything is stored.
Status CheckRequest(const study::StudySpec& spec) {
  const study::SlurmSpec& s = *spec.cluster.slurm;
  // Slurm shares a GPU between jobs through its shard gres, which the cluster must have.
  if (spec.resources.SharesGpu()) {
    if (Status st = slurm::ShardsFor(s, ProbeShare(spec)).status(); !st.ok()) {
      const study::SourcePos* pos = s.Position(s.gpu_shards > 0 ? "gpu_memory" : "gpu_shards");
      return Status::Invalid(
          pos ? StrCat(pos->file, ":", pos->line, ":", pos->column, ": ", pos->key, ": ") : "",
          st.message());
    }
  }
  HP_ASSIGN_OR_RETURN(slurm::JobShape shape, slurm::ShapeFor(s, ProbeDemand(spec)));
  char tmpl[] = "/tmp/hyperpack-sbatch-test-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) return Status::Io("cannot write a test script in /tmp");
  const std::string body = "#!/bin/sh\ntrue\n";
  (void)!write(fd, body.data(), body.size());
  close(fd);
  std::vector<std::string> argv = {"sbatch", "--test-only"};
  for (std::string& a : slurm::SbatchArgs(s, shape, {spec.name, 0, 0, 1}, "/tmp")) {
    if (a == "--parsable") continue;  // --test-only prints its estimate, not an id
    argv.push_back(std::move(a));
  }
  argv.push_back(tmpl);
  Result<slurm::CommandOutput> r = slurm::RunCommand(argv, 60);
  unlink(tmpl);
  if (!r.ok()) return r.status();
  if (r->exit_code == 0) return Status::Ok();
  std::string why = r->err.empty() ? r->out : r->err;
  while (!why.empty() && std::isspace(static_cast<unsigned char>(why.back()))) why.pop_back();
  const std::string key = slurm::RefusalKey(why);
  const study::SourcePos* pos = s.Position(key.empty() ? "slurm" : key);
  std::string where =
      pos ? StrCat(pos->file, ":", pos->line, ":", pos->column, ": ", pos->key, ": ")
          : std::string();
  return Status::Invalid(where, "Slurm refuses the study's job request: ", why,
                         key == "resources"
                             ? " (no node of the partition has what the trial asks for; sinfo "
                               "-o '%P %c %m %G' lists what they have)"
                             : "");
}

}  // namespace

Result<RunSummary> RunSlurmStudy(const study::StudySpec& spec, const RunOptions& options) {
  if (!spec.cluster.slurm) return Status::Internal("RunSlurmStudy: the study has no cluster.slurm");
  HP_RETURN_IF_ERROR(CheckRequest(spec));
  slurm::ExecutorOptions eo;
  eo.spec = *spec.cluster.slurm;
  eo.study = spec.name;
  eo.self_exe = SelfExe();
  // Jobs of this study still queued or running from an earlier run, to re-attach.
  HP_ASSIGN_OR_RETURN(eo.existing, slurm::ListStudyJobs(spec.name));

  asio::io_context io;
  asio::thread_pool pool(2);
  std::vector<std::string> names;
  for (int g = 0; g < kSlurmSlots; ++g) names.push_back(std::to_string(g));
  // Slurm places the jobs; this node only bounds how many run at once. Its GPUs' memory is the
  // partition's, so that memory shares (Slurm shards) can be placed on it.
  std::vector<ClusterNode> nodes = {
      {{"slurm", kSlurmSlots, kSlurmSlots, spec.cluster.slurm->gpu_memory_mb}, names, "slurm"}};
  std::unique_ptr<Executor> executor = slurm::MakeSlurmExecutor(io, std::move(eo));
  std::unique_ptr<StudyRun> run =
      MakeStudyRun(spec, options, io, pool, std::move(nodes), executor.get());
  Result<RunSummary> result = Status::Internal("the run ended without a result");
  HP_RETURN_IF_ERROR(run->Begin([&](Result<RunSummary> r) {
    result = std::move(r);
    executor->Shutdown();
  }));
  io.run();
  pool.join();
  executor.reset();  // after its last scancel
  return result;
}

Status RunSlurmTask(const std::string& command) {
  const std::map<std::string, std::string> env = EnvironmentMap(CurrentEnvironment());
  HP_ASSIGN_OR_RETURN(auto vars, slurm::TorchrunFromSlurm(env));
  for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
  // Slurm's warning signal (--signal) reaches every process of the step; a shell would die of
  // it. Ignored here, and so for every program that does not ask for it (a handler replaces it).
  signal(SIGUSR1, SIG_IGN);
  signal(SIGUSR2, SIG_IGN);
  execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
  return Status::Unavailable("cannot run /bin/sh: ", std::strerror(errno));
}

}  // namespace hyperpack::scheduler
