#include "local_slurm.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace hyperpack::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kPoll{50};
constexpr std::chrono::seconds kStartTimeout{30};  // until the node is idle
constexpr std::chrono::seconds kJobsEndTimeout{20};
constexpr std::chrono::seconds kTermTimeout{5};  // SIGTERM to SIGKILL
constexpr int kLogTailLines = 25;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool WriteWhole(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

// Variables that would point Slurm's clients at another cluster or job.
bool IsInheritedSlurmVariable(const char* entry) {
  for (const char* prefix : {"SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_", "SACCT_",
                             "SCONTROL_", "SCANCEL_"}) {
    if (std::strncmp(entry, prefix, std::strlen(prefix)) == 0) return true;
  }
  return false;
}

// The calling process's environment without inherited Slurm variables, plus `extra`.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!IsInheritedSlurmVariable(*e)) env.emplace_back(*e);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> Pointers(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// `n` distinct loopback TCP ports that were free a moment ago (all bound at once, then released).
std::vector<int> FreePorts(int n, std::string* error) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n && error->empty(); ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *error = Errno("socket");
      break;
    }
    fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      *error = Errno("binding a free loopback port");
      break;
    }
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) close(fd);
  return ports;
}

// Total memory in MiB, from /proc/meminfo; 0 when unknown.
long MemoryMiB() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib / 1024;
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "stopped";
}

// The NUL-separated entries of /proc/<pid>/<file>; empty when the process is gone or a zombie.
std::vector<std::string> ProcEntries(const std::string& pid, const char* file) {
  std::string text = ReadWhole("/proc/" + pid + "/" + file);
  std::vector<std::string> entries;
  std::stringstream in(text);
  for (std::string entry; std::getline(in, entry, '\0');) entries.push_back(entry);
  return entries;
}

// slurm.conf for one node of `cpus` cores, `real_memory` MiB and `gpus` fake GPUs (each in
// options.gpu_shards shards where that is positive), its files under `d`, slurmctld and slurmd
// on `ports`.
std::string SlurmConf(const std::string& d, const std::vector<int>& ports, int cpus,
                      long real_memory, int gpus, const LocalSlurm::Options& options) {
  const std::string auth_info = "socket=" + d + "/munge/munge.socket";
  std::ostringstream c;
  c << "# Written by LocalSlurm (tests/local_slurm.cc) for one test run.\n"
    << "ClusterName=hyperpack\n"
    << "SlurmctldHost=localhost\n"
    << "SlurmctldPort=" << ports[0] << "\n"
    << "SlurmdPort=" << ports[1] << "\n"
    << "AuthType=auth/munge\n"
    << "AuthInfo=" << auth_info << "\n"
    << "CredType=cred/munge\n"
    << "SlurmUser=root\n"
    << "SlurmdUser=root\n"
    << "StateSaveLocation=" << d << "/state\n"
    << "SlurmdSpoolDir=" << d << "/spool\n"
    << "SlurmctldPidFile=" << d << "/slurmctld.pid\n"
    << "SlurmdPidFile=" << d << "/slurmd.pid\n"
    << "SlurmctldLogFile=" << d << "/slurmctld.log\n"
    << "SlurmdLogFile=" << d << "/slurmd.log\n"
    << "MailProg=/bin/true\n"
    << "MpiDefault=none\n"
    // No cgroups here.
    << "ProctrackType=proctrack/linuxproc\n"
    << "TaskPlugin=task/none\n"
    << "JobAcctGatherType=jobacct_gather/none\n"
    // Cores and memory are consumable, and a job without --mem takes 100 MB, not the node.
    << "SelectType=select/cons_tres\n"
    << "SelectTypeParameters=CR_Core_Memory\n"
    << "DefMemPerCPU=100\n"
    << "SchedulerType=sched/backfill\n"
    << "SchedulerParameters=bf_interval=1\n"
    << "PreemptType=preempt/partition_prio\n"
    << "PreemptMode=" << options.preempt_mode << "\n"
    << "JobRequeue=1\n"
    << "SlurmctldParameters=preempt_send_user_signal\n"
    // No slurmdbd: `sacct -c` reads this file, and finished jobs stay in squeue for 10 minutes.
    << "JobCompType=jobcomp/filetxt\n"
    << "JobCompLoc=" << d << "/jobcomp.txt\n"
    << "MinJobAge=600\n"
    << "MessageTimeout=10\n"
    << "SlurmdTimeout=30\n"
    << "InactiveLimit=0\n"
    << "ReturnToService=2\n"
    << "KillWait=5\n";
  const bool shards = gpus > 0 && options.gpu_shards > 0;
  if (gpus > 0) c << (shards ? "GresTypes=gpu,shard\n" : "GresTypes=gpu\n");
  c << "NodeName=localhost CPUs=" << cpus << " RealMemory=" << real_memory;
  if (gpus > 0) c << " Gres=gpu:" << gpus;
  if (shards) c << ",shard:" << gpus * options.gpu_shards;
  c << " State=UNKNOWN\n"
    << "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP PriorityTier=1"
    << " PreemptMode=" << options.preempt_mode << "\n"
    << "PartitionName=high Nodes=localhost MaxTime=INFINITE State=UP PriorityTier=2"
    << " PreemptMode=OFF\n";
  return c.str();
}

}  // namespace

std::unique_ptr<LocalSlurm> LocalSlurm::Start(const Options& options, std::string* error) {
  std::string ignored;
  if (error == nullptr) error = &ignored;
  if (options.gpus < 0 || options.cpus < 0) {
    *error = "LocalSlurm: gpus and cpus must be >= 0";
    return nullptr;
  }
  std::unique_ptr<LocalSlurm> slurm(new LocalSlurm());
  std::string tmpl = (fs::temp_directory_path() / "hyperpack-slurm-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    *error = Errno("LocalSlurm: mkdtemp " + tmpl);
    return nullptr;
  }
  slurm->dir_ = tmpl;
  slurm->conf_ = tmpl + "/slurm.conf";  // in every daemon's environment, munged's too
  // munged insists that every directory above its socket lets others search it.
  if (chmod(tmpl.c_str(), 0711) != 0) {
    *error = Errno("LocalSlurm: chmod " + tmpl);
    return nullptr;
  }
  std::string failure = slurm->StartMunge();
  if (failure.empty()) failure = slurm->StartSlurm(options);
  if (failure.empty()) failure = slurm->WaitForIdleNode();
  if (!failure.empty()) {
    *error = "LocalSlurm in " + slurm->dir_ + ": " + failure;
    return nullptr;  // the destructor stops whatever did start
  }
  return slurm;
}

std::string LocalSlurm::StartMunge() {
  std::string munge = dir_ + "/munge";
  if (mkdir(munge.c_str(), 0711) != 0 || chmod(munge.c_str(), 0711) != 0) {
    return Errno("mkdir " + munge);
  }
  // munged accepts keys of 32 to 1024 bytes, readable by its owner only.
  std::string key = munge + "/munge.key";
  std::string bytes(1024, '\0');
  {
    std::ifstream random("/dev/urandom", std::ios::binary);
    if (!random.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
      return "reading /dev/urandom for the munge key failed";
    }
  }
  int fd = open(key.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
  if (fd < 0) return Errno("creating " + key);
  bool written = write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  close(fd);
  if (!written) return Errno("writing " + key);

  std::string socket = munge + "/munge.socket";
  std::string failure =
      Spawn("munged",
            {"/usr/sbin/munged", "--foreground", "--socket=" + socket, "--key-file=" + key,
             "--pid-file=" + munge + "/munged.pid", "--log-file=" + dir_ + "/munged.log",
             "--seed-file=" + munge + "/munged.seed"},
            &munged_);
  if (!failure.empty()) return failure;
  for (auto deadline = Clock::now() + std::chrono::seconds(10); !fs::exists(socket);) {
    if (std::string exited = Exited(&munged_); !exited.empty()) return exited;
    if (Clock::now() > deadline) {
      return "munged made no socket " + socket + " in 10 s; its log:\n" + LogTail("munged");
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  return "";
}

std::string LocalSlurm::StartSlurm(const Options& options) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  cpus_ = options.cpus > 0 ? options.cpus : static_cast<int>(online > 0 ? online : 1);
  gpus_ = options.gpus;
  long memory = MemoryMiB();
  // Below what slurmd will find, or the node drains for low memory.
  long real_memory = memory > 4096 ? memory - 2048 : std::max(memory / 2, 1L);

  for (const char* sub : {"/state", "/spool", "/gpu"}) {
    if (mkdir((dir_ + sub).c_str(), 0755) != 0) return Errno("mkdir " + dir_ + sub);
  }
  // Fake GPUs: Gres=gpu without device files drains the node. /dev/null's numbers will do.
  for (int i = 0; i < gpus_; ++i) {
    std::string path = dir_ + "/gpu/nvidia" + std::to_string(i);
    if (mknod(path.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) return Errno("mknod " + path);
  }

  std::string error;
  std::vector<int> ports = FreePorts(2, &error);
  if (!error.empty()) return error;

  const std::string& d = dir_;
  const bool shards = gpus_ > 0 && options.gpu_shards > 0;
  if (!WriteWhole(conf_, SlurmConf(d, ports, cpus_, real_memory, gpus_, options)))
    return Errno("writing " + conf_);
  if (gpus_ > 0) {
    std::string files = gpus_ == 1 ? "nvidia0" : "nvidia[0-" + std::to_string(gpus_ - 1) + "]";
    std::string gres = "NodeName=localhost Name=gpu File=" + d + "/gpu/" + files + "\n";
    for (int i = 0; shards && i < gpus_; ++i)
      gres += "NodeName=localhost Name=shard Count=" + std::to_string(options.gpu_shards) +
              " File=" + d + "/gpu/nvidia" + std::to_string(i) + "\n";
    if (!WriteWhole(d + "/gres.conf", gres)) return Errno("writing " + d + "/gres.conf");
  }

  // -c: start from a clean state; -i: never stop over a state file.
  std::string failure =
      Spawn("slurmctld", {"/usr/sbin/slurmctld", "-D", "-c", "-i", "-f", conf_}, &slurmctld_);
  if (failure.empty()) {
    failure = Spawn("slurmd", {"/usr/sbin/slurmd", "-D", "-N", "localhost", "-f", conf_}, &slurmd_);
  }
  return failure;
}

std::string LocalSlurm::WaitForIdleNode() {
  std::string state;
  for (auto deadline = Clock::now() + kStartTimeout; Clock::now() < deadline;) {
    for (Daemon* daemon : {&munged_, &slurmctld_, &slurmd_}) {
      if (std::string exited = Exited(daemon); !exited.empty()) return exited;
    }
    std::string output;
    if (Run({"sinfo", "--noheader", "--nodes=localhost", "--format=%T"}, &output) == 0) {
      state = Trim(output);
      if (state == "idle") return "";
      // Drained or invalid (more CPUs or memory than the machine has, a missing GPU file) for good.
      if (state.find("drain") != std::string::npos || state.find("inval") != std::string::npos) {
        std::string node;
        Run({"scontrol", "show", "node", "localhost"}, &node);
        return "the node is " + state + ":\n" + node + "\nslurmd's log:\n" + LogTail("slurmd");
      }
    }
    std::this_thread::sleep_for(kPoll);
  }
  return "the node was not idle after " + std::to_string(kStartTimeout.count()) +
         " s (last state: '" + state + "')\nslurmctld's log:\n" + LogTail("slurmctld") +
         "\nslurmd's log:\n" + LogTail("slurmd");
}

std::string LocalSlurm::Spawn(const std::string& name, const std::vector<std::string>& argv,
                              Daemon* daemon) {
  std::vector<std::string> env = ChildEnvironment(Env());
  std::vector<char*> args = Pointers(argv), envp = Pointers(env);
  std::string out = dir_ + "/" + name + ".out";
  int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0) return Errno("opening " + out);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = fork();
  if (pid == 0) {
    setsid();  // a session of its own: no signal meant for the test reaches it, nor the reverse
    dup2(null_fd, 0);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    if (chdir(dir_.c_str()) != 0) _exit(126);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  int fork_errno = errno;
  close(out_fd);
  if (null_fd >= 0) close(null_fd);
  if (pid < 0) {
    errno = fork_errno;
    return Errno("fork for " + name);
  }
  daemon->name = name;
  daemon->pid = pid;
  return "";
}

std::string LocalSlurm::Exited(Daemon* daemon) {
  if (daemon->pid <= 0) return "";
  int status = 0;
  if (waitpid(daemon->pid, &status, WNOHANG) != daemon->pid) return "";
  daemon->pid = -1;
  std::string how = Describe(status);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) how += " (could not be executed)";
  return daemon->name + " " + how + "; its log:\n" + LogTail(daemon->name);
}

std::string LocalSlurm::LogTail(const std::string& name) const {
  // In the foreground (-D) the daemons copy their log to stderr, which also has what they say
  // before their log file is open; the log file also has slurmstepd's lines.
  std::string text = ReadWhole(dir_ + "/" + name + ".out");
  if (Trim(text).empty()) text = ReadWhole(dir_ + "/" + name + ".log");
  std::deque<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > kLogTailLines) lines.pop_front();
  }
  std::string tail;
  for (const std::string& line : lines) tail += "  " + line + "\n";
  return tail.empty() ? "  (empty)\n" : tail;
}

std::vector<std::string> LocalSlurm::Env() const { return {"SLURM_CONF=" + conf_}; }

int LocalSlurm::Run(const std::vector<std::string>& argv, std::string* output) const {
  output->clear();
  if (argv.empty()) return -1;
  std::vector<std::string> env = ChildEnvironment(Env());
  std::vector<char*> args = Pointers(argv), envp = Pointers(env);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    *output = Errno("pipe");
    return -1;
  }
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(null_fd, 0);
    dup2(pipe_fds[1], 1);
    dup2(pipe_fds[1], 2);
    if (chdir(dir_.c_str()) != 0) _exit(126);
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  if (null_fd >= 0) close(null_fd);
  if (pid < 0) {
    close(pipe_fds[0]);
    *output = Errno("fork");
    return -1;
  }
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) != 0;) {
    if (n > 0) {
      output->append(buffer, static_cast<size_t>(n));
    } else if (errno != EINTR) {
      break;
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

LocalSlurm::~LocalSlurm() {
  if (slurmctld_.pid > 0 && Exited(&slurmctld_).empty()) CancelJobs();
  Stop(&slurmd_);
  Stop(&slurmctld_);
  KillLeftovers();
  Stop(&munged_);
  if (!dir_.empty()) {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
}

void LocalSlurm::CancelJobs() {
  std::string output;
  // squeue without --states lists the jobs that have not ended: pending, running, completing...
  const std::vector<std::string> unfinished = {"squeue", "--noheader", "--format=%i"};
  if (Run(unfinished, &output) != 0) return;
  std::vector<std::string> scancel = {"scancel"};
  std::stringstream ids(output);
  for (std::string id; ids >> id;) scancel.push_back(id);
  if (scancel.size() == 1) return;
  Run(scancel, &output);
  for (auto deadline = Clock::now() + kJobsEndTimeout; Clock::now() < deadline;) {
    if (Run(unfinished, &output) != 0 || Trim(output).empty()) return;
    std::this_thread::sleep_for(kPoll);
  }
}

void LocalSlurm::Stop(Daemon* daemon) {
  if (daemon->pid <= 0) return;
  pid_t pid = daemon->pid;
  daemon->pid = -1;
  kill(pid, SIGTERM);
  int status = 0;
  for (auto deadline = Clock::now() + kTermTimeout; Clock::now() < deadline;) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      kill(-pid, SIGKILL);  // anything it left in its session
      return;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

void LocalSlurm::KillLeftovers() {
  // slurmstepd ignores SIGTERM and, like the jobs it runs, is not our child (slurmd daemonizes it).
  // Both inherit SLURM_CONF from slurmd or sbatch; jobs also carry SLURM_JOB_ID.
  if (conf_.empty()) return;
  const std::string ours = "SLURM_CONF=" + conf_;
  const std::string self = std::to_string(getpid());
  for (auto deadline = Clock::now() + kTermTimeout;;) {
    int found = 0;
    std::error_code ec;
    for (const fs::directory_entry& entry : fs::directory_iterator("/proc", ec)) {
      std::string pid = entry.path().filename().string();
      if (pid.find_first_not_of("0123456789") != std::string::npos || pid == self) continue;
      std::vector<std::string> env = ProcEntries(pid, "environ");
      bool mine = false, job = false;
      for (const std::string& e : env) {
        mine = mine || e == ours;
        job = job || e.rfind("SLURM_JOB_ID=", 0) == 0;
      }
      if (!mine) continue;
      if (!job && Trim(ReadWhole("/proc/" + pid + "/comm")) != "slurmstepd") continue;
      kill(std::stoi(pid), SIGKILL);
      ++found;
    }
    if (found == 0 || Clock::now() > deadline) return;
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace hyperpack::testing
