// hyperpack serve with real agents over loopback: placement across nodes, authentication, bad
// frames, and an agent that dies mid-trial.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "curve_script.h"
#include "fake_warm_trainer.h"
#include "http_util.h"
#include "hyperpack/config_json.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/text.h"
#include "local_postgres.h"
#include "test_util.h"

namespace hyperpack {
namespace {

using hyperpack::testing::ReadFile;
using hyperpack::testing::RunCommand;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using ::testing::HasSubstr;

using Child = hyperpack::testing::PipedChild;
constexpr auto& Start = hyperpack::testing::StartPiped;

class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_ = dir_ / "token";
    WriteFile(token_, "0123456789abcdef-shared-secret\n");
    chmod(token_.c_str(), 0600);
    StartServer("127.0.0.1:0");
  }
  void TearDown() override {
    for (Child& a : agents_) {
      if (a.pid > 0) kill(a.pid, SIGCONT);
      a.Stop();
    }
    server_.Stop();
  }

  // Starts the server on `listen` (port 0: any) and reads its address.
  void StartServer(const std::string& listen) {
    std::vector<std::string> args = {HYPERPACK_CLI,
                                     "serve",
                                     "--listen",
                                     listen,
                                     "--token-file",
                                     token_,
                                     "--storage",
                                     db_,
                                     "--heartbeat-timeout",
                                     FormatDouble(heartbeat_timeout_)};
    args.insert(args.end(), server_args_.begin(), server_args_.end());
    server_ = Start(args, dir_.path().string());
    std::string line = server_.Until("listening on");
    auto at = line.find("listening on ");
    ASSERT_NE(at, std::string::npos) << line;
    address_ = line.substr(at + 13);
    address_.erase(address_.find_last_not_of(" \n\r") + 1);
  }

  // Starts an agent; waits for the server to say it joined unless `wait` is false.
  // `extra`: more of the agent's flags.
  void StartAgent(const std::string& name, int gpus, bool wait = true,
                  const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {HYPERPACK_CLI,  "agent",
                                     "--connect",    address_,
                                     "--token-file", token_,
                                     "--name",       name,
                                     "--fake-gpus",  std::to_string(gpus),
                                     "--heartbeat",  FormatDouble(agent_heartbeat_)};
    args.insert(args.end(), extra.begin(), extra.end());
    agents_.push_back(Start(args, dir_.path().string()));
    if (!wait) return;
    ASSERT_THAT(server_.Until("agent " + name + " joined"), HasSubstr("joined"));
  }

  testing::Ran Submit(const std::string& study) {
    std::string path = dir_ / "study.yaml";
    WriteFile(path, study);
    return RunCommand({HYPERPACK_CLI, "run", path, "--server", address_, "--token-file", token_},
                      dir_.path().string());
  }

  // The value of each completed trial of `study`, by number.
  std::map<int, double> CompletedValues(const std::string& study) {
    std::map<int, double> out;
    for (const auto& t : Trials(study))
      if (t.state == storage::TrialState::kCompleted) out[t.number] = *t.value;
    return out;
  }

  // After a server was killed: every trial of `study` completed or was interrupted (and ran again
  // under another number), `want` completed, and those completed before (`before`) kept their
  // values.
  void ExpectCompletedKeeping(const std::string& study, int want,
                              const std::map<int, double>& before) {
    int completed = 0;
    for (const auto& t : Trials(study)) {
      EXPECT_TRUE(t.state == storage::TrialState::kCompleted ||
                  t.state == storage::TrialState::kInterrupted)
          << t.number << " " << storage::TrialStateName(t.state);
      if (t.state != storage::TrialState::kCompleted) continue;
      ++completed;
      if (auto b = before.find(t.number); b != before.end()) {
        EXPECT_EQ(*t.value, b->second);
      }
    }
    EXPECT_EQ(completed, want);
    const auto trials = Trials(study);
    for (const auto& [number, value] : before)
      EXPECT_EQ(trials[number].state, storage::TrialState::kCompleted) << number;
  }

  std::vector<storage::TrialRecord> Trials(const std::string& study) {
    auto db = storage::Storage::Open(db_).value();
    auto found = db->FindStudy(study).value();
    if (!found) return {};
    return db->ListTrials(found->id).value();
  }

  TempDir dir_;
  std::string db_ = dir_ / "h.db";
  std::string token_;
  std::string address_;
  std::vector<std::string> server_args_;  // more of `hyperpack serve`'s flags
  Child server_;
  std::vector<Child> agents_;
  double heartbeat_timeout_ = 60;
  double agent_heartbeat_ = 5;
};

// Short heartbeats, so that lost agents and restarts are noticed within a test's time.
class ResilienceTest : public ServeTest {
 protected:
  void SetUp() override {
    // An agent's fence stops its ranks two heartbeats before the server may declare it lost. At
    // 0.4 s, that margin (0.8 s) leaves the fence's keeper time to be scheduled on a loaded
    // machine; a lost agent is still seen after 2 s.
    heartbeat_timeout_ = 2;
    agent_heartbeat_ = 0.4;
    ServeTest::SetUp();
  }

  // Submits study `name` (6 trials of 0.4 s, 2 at a time) through address_ and returns its client
  // once trial 2 started, so that a trial completed before.
  Child SubmitSlowStudy(const std::string& name);
};

// The first line a trial writes to the FIFO at `path` (opened read-write, so that it never sees
// end-of-file before the writer comes).
std::string ReadFifoLine(const std::string& path) {
  int fifo = open(path.c_str(), O_RDWR);
  std::string line;
  char c;
  while (read(fifo, &c, 1) == 1 && c != '\n') line += c;
  close(fifo);
  return line;
}

// Records, per rank, where it ran and what it was given.
constexpr char kTrialScript[] = R"(#!/bin/sh
echo "$HYPERPACK_AGENT $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $CUDA_VISIBLE_DEVICES" > "$HYPERPACK_TRIAL_DIR/rank-$RANK.where"
if [ "$RANK" = 0 ]; then echo "{\"loss\": $1}"; fi
)";

TEST_F(ServeTest, TrialsSpreadOverAgentsAsGangsWithTheirOwnDevices) {
  StartAgent("a1", 2);
  StartAgent("a2", 2);
  StartAgent("a3", 2);
  WriteFile(dir_ / "trial.sh", kTrialScript, true);
  auto r = Submit(R"(
name: spread
objective: {metric: loss, direction: minimize}
search_space:
  g: {type: categorical, values: [1, 2, 4]}
  x: {type: float, low: 0, high: 1}
trial: {command: "sh )" +
                  (dir_ / "trial.sh") + R"( {x}"}
tuner: {algorithm: random, seed: 3}
budget: {max_trials: 9, max_parallel: 3}
resources: {gpus: "{g}"}
)");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("budget reached"));
  auto trials = Trials("spread");
  ASSERT_EQ(trials.size(), 9u);
  std::set<std::string> agents_used;
  for (const auto& t : trials) {
    EXPECT_EQ(t.state, storage::TrialState::kCompleted) << t.error;
    int g = static_cast<int>(std::get<int64_t>(t.params.at("g")));
    std::string dir = std::filesystem::path(t.log_path).parent_path().string();
    std::set<std::string> slots;
    std::map<std::string, int> per_agent;
    for (int rank = 0; rank < g; ++rank) {
      std::istringstream in(ReadFile(dir + "/rank-" + std::to_string(rank) + ".where"));
      std::string agent, device;
      int rk, world, local, local_world;
      in >> agent >> rk >> world >> local >> local_world >> device;
      EXPECT_EQ(rk, rank);
      EXPECT_EQ(world, g);
      slots.insert(agent + "/" + device);
      per_agent[agent]++;
      agents_used.insert(agent);
    }
    EXPECT_EQ(slots.size(), static_cast<size_t>(g)) << "two ranks on one GPU";
    // A gang that fits on one node (2 GPUs) stays on one; 4 GPUs must span two.
    EXPECT_EQ(per_agent.size(), g <= 2 ? 1u : 2u);
  }
  EXPECT_GE(agents_used.size(), 2u);
  // The read commands work against the server's storage.
  auto best = RunCommand({HYPERPACK_CLI, "best", "spread", "--storage", db_});
  EXPECT_EQ(best.exit_code, 0);
}

// Shares of a GPU on agents: each agent states its GPU's memory when it joins, and trials of
// 4 GiB run two to each 8 GiB GPU; the first four wait for one another, so four ran at once.
TEST_F(ServeTest, AgentsStateTheirGpusMemoryAndTrialsShareThem) {
  StartAgent("m1", 1, false, {"--fake-gpu-memory", "8192"});
  ASSERT_THAT(server_.Until("agent m1 joined"), HasSubstr("1 GPUs of 8192 MiB"));
  StartAgent("m2", 1, true, {"--fake-gpu-memory", "8192"});
  WriteFile(dir_ / "share.sh", "#!/bin/sh\n" + testing::ShellBarrier(dir_ / "marks", 4) + R"sh(
echo "$HYPERPACK_AGENT/$CUDA_VISIBLE_DEVICES" > "$HYPERPACK_TRIAL_DIR/where"
echo "{\"loss\": $1}"
)sh",
            true);
  auto r = Submit(R"(
name: shared
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )" +
                  (dir_ / "share.sh") + R"( {x}"}
tuner: {algorithm: random, seed: 3}
budget: {max_trials: 8, max_parallel: 8}
resources: {gpu_memory: 4GiB}
)");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  struct Use {
    double start, end;
    std::string where;
  };
  std::vector<Use> uses;
  for (const auto& t : Trials("shared")) {
    EXPECT_EQ(t.state, storage::TrialState::kCompleted) << t.error;
    std::string where =
        ReadFile((std::filesystem::path(t.log_path).parent_path() / "where").string());
    EXPECT_TRUE(where == "m1/0\n" || where == "m2/0\n") << where;
    uses.push_back({*t.started, *t.ended, where});
  }
  ASSERT_EQ(uses.size(), 8u);
  size_t most = 0;
  for (const Use& u : uses) {
    std::map<std::string, int> on;
    size_t at_once = 0;
    for (const Use& v : uses)
      if (v.start <= u.start && u.start < v.end) ++on[v.where], ++at_once;
    for (const auto& [where, n] : on) EXPECT_LE(n, 2) << where << " holds 8 GiB, two trials";
    most = std::max(most, at_once);
  }
  EXPECT_GE(most, 4u);
}

// Prometheus's text format: "name{labels} value" lines, by "name{labels}"; comments skipped.
std::map<std::string, double> ParseMetrics(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    out[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

class ServeMetricsTest : public ServeTest {
 protected:
  void SetUp() override {
    server_args_ = {"--metrics", "127.0.0.1:0"};
    ServeTest::SetUp();
    const std::string line = server_.Until("/metrics");
    const size_t at = line.find("metrics on http://127.0.0.1:");
    ASSERT_NE(at, std::string::npos) << line;
    metrics_port_ = std::stoi(line.substr(at + 28));
  }

  std::map<std::string, double> Scrape() {
    testing::HttpReply r = testing::HttpGet(metrics_port_, "/metrics");
    EXPECT_EQ(r.status, 200) << r.headers;
    return ParseMetrics(r.body);
  }

  int metrics_port_ = 0;
};

TEST_F(ServeMetricsTest, PrometheusSeesTheQueueTheBusyGpusTheTrialsAndALostAgent) {
  StartAgent("m1", 2);
  StartAgent("m2", 1);
  // The server sets its gauges before it logs a change (an agent joined or was lost, a study
  // ended) and before it sends a launch: a scrape after the line, or after the trial started, sees
  // the change.
  auto idle = Scrape();
  EXPECT_EQ(idle["hyperpack_agents"], 2);
  EXPECT_EQ(idle["hyperpack_gpus"], 3);
  EXPECT_EQ(idle["hyperpack_gpus_busy"], 0);
  EXPECT_EQ(idle["hyperpack_studies_running"], 0);

  // Two one-GPU trials that hold their GPUs until the test lets them go.
  // (A file, not a FIFO, lets them go: a FIFO's one write could reach one reader only.)
  ASSERT_EQ(mkfifo((dir_ / "started").c_str(), 0600), 0);
  WriteFile(dir_ / "hold.sh", "#!/bin/sh\necho up > " + (dir_ / "started") + "\nwhile [ ! -f " +
                                  (dir_ / "go") +
                                  " ]; do sleep 0.05; done\necho '{\"loss\": 1}'\n");
  WriteFile(dir_ / "study.yaml", R"(
name: watched
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )" + (dir_ / "hold.sh") +
                                     R"("}
budget: {max_trials: 2, max_parallel: 2}
resources: {gpus: 1}
)");
  Child client = Start(
      {HYPERPACK_CLI, "run", dir_ / "study.yaml", "--server", address_, "--token-file", token_},
      dir_.path().string());
  {  // Both lines through one open: a FIFO that no one holds open drops what it buffered.
    int fifo = open((dir_ / "started").c_str(), O_RDWR);
    std::string lines;
    char c;
    while (std::count(lines.begin(), lines.end(), '\n') < 2 && read(fifo, &c, 1) == 1) lines += c;
    close(fifo);
    ASSERT_EQ(lines, "up\nup\n");
  }
  auto busy = Scrape();
  EXPECT_EQ(busy["hyperpack_studies_running"], 1);
  EXPECT_EQ(busy["hyperpack_trials{state=\"running\"}"], 2);
  EXPECT_EQ(busy["hyperpack_gpus"], 3);
  EXPECT_EQ(busy["hyperpack_gpus_busy"], 2);
  EXPECT_GE(busy["hyperpack_proposal_seconds_count"], 1);
  EXPECT_EQ(busy["hyperpack_proposal_seconds_bucket{le=\"+Inf\"}"],
            busy["hyperpack_proposal_seconds_count"]);

  WriteFile(dir_ / "go", "go\n");
  EXPECT_THAT(client.Until("budget reached"), HasSubstr("budget reached"));
  client.Stop(0);
  ASSERT_THAT(server_.Until("study watched done"), HasSubstr("done (exit 0)"));
  auto done = Scrape();
  EXPECT_EQ(done["hyperpack_studies_running"], 0);
  EXPECT_EQ(done["hyperpack_trials{state=\"running\"}"], 0);
  EXPECT_EQ(done["hyperpack_gpus_busy"], 0);
  EXPECT_EQ(done["hyperpack_agents_lost_total"], 0);

  agents_[1].Stop(SIGKILL);
  ASSERT_THAT(server_.Until("lost"), HasSubstr("agent m2 lost"));
  auto lost = Scrape();
  EXPECT_EQ(lost["hyperpack_agents_lost_total"], 1);
  EXPECT_EQ(lost["hyperpack_agents"], 1);
  EXPECT_EQ(lost["hyperpack_gpus"], 2);
}

TEST_F(ServeTest, AMetricsAddressThatCannotBeUsedIsAClearError) {
  for (const char* bad : {"nonsense", "192.0.2.1:9464"}) {  // not HOST:PORT; not this machine's
    auto r = RunCommand({HYPERPACK_CLI, "serve", "--listen", "127.0.0.1:0", "--token-file", token_,
                         "--storage", dir_ / "other.db", "--metrics", bad},
                        dir_.path().string());
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_THAT(r.err, HasSubstr(StrCat("--metrics ", bad, ": "))) << r.out;
    EXPECT_THAT(r.err, HasSubstr("127.0.0.1:9464")) << "an example of what would work";
  }
}

TEST_F(ServeTest, APreemptAfterOutOfRangeIsAClearError) {
  for (const char* bad : {"-1", "-0.5", "100000"}) {
    auto r = RunCommand({HYPERPACK_CLI, "serve", "--listen", "127.0.0.1:0", "--token-file", token_,
                         "--storage", dir_ / "other.db", StrCat("--preempt-after=", bad)},
                        dir_.path().string());
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out;
    EXPECT_THAT(r.err, HasSubstr("--preempt-after")) << bad;
    EXPECT_THAT(r.err, HasSubstr("expected seconds in [0, 86400]")) << bad;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "other.db")) << "nothing is created";
}

TEST_F(ServeTest, AWrongTokenAndAPlaintextPeerAreRejectedWhileOthersKeepWorking) {
  StartAgent("good", 1);
  WriteFile(dir_ / "wrong", "not-the-right-token-at-all\n");
  chmod((dir_ / "wrong").c_str(), 0600);
  auto evil = RunCommand({HYPERPACK_CLI, "agent", "--connect", address_, "--token-file",
                          dir_ / "wrong", "--name", "evil"});
  EXPECT_NE(evil.exit_code, 0);
  EXPECT_THAT(evil.err + evil.out, HasSubstr("wrong token"));
  // The token is the TLS key: a wrong one fails the handshake, before any frame is read.
  EXPECT_THAT(server_.Until("rejected"), HasSubstr("TLS handshake failed"));

  // A raw connection that answers the challenge in plaintext, with an absurd frame length.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address_.substr(address_.rfind(':') + 1))));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const unsigned char huge[4] = {0x7f, 0xff, 0xff, 0xff};
  ASSERT_EQ(write(fd, huge, 4), 4);
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) {  // the challenge, then end-of-file
  }
  EXPECT_EQ(n, 0);
  close(fd);
  EXPECT_THAT(server_.Until("rejected"), HasSubstr("plaintext where TLS was due"));

  // The good agent still runs trials.
  WriteFile(dir_ / "trial.sh", kTrialScript, true);
  auto r = Submit(R"(
name: after
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )" +
                  (dir_ / "trial.sh") + R"( {x}"}
budget: {max_trials: 2}
resources: {gpus: 1}
)");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const auto& t : Trials("after")) EXPECT_EQ(t.state, storage::TrialState::kCompleted);
}

// Something at a loopback port that ends each connection during the handshake, as a server does
// that is going away or past its handshake deadline: its first at once, the rest after a
// challenge that asks for TLS, when the peer's first TLS bytes come.
class ClosingListener {
 public:
  ClosingListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    socklen_t len = sizeof(addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd_, 8) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      ADD_FAILURE() << "cannot listen: " << strerror(errno);
    address_ = StrCat("127.0.0.1:", ntohs(addr.sin_port));
    thread_ = std::thread([this] { Serve(); });
  }
  ~ClosingListener() {
    shutdown(fd_, SHUT_RDWR);  // wakes the accept
    thread_.join();
    close(fd_);
  }
  const std::string& address() const { return address_; }
  int connections() const { return connections_; }

 private:
  void Serve() {
    const std::string challenge = R"({"type":"challenge","version":2,"nonce":"00","tls":true})";
    const unsigned char length[4] = {0, 0, 0, static_cast<unsigned char>(challenge.size())};
    int c;
    while ((c = accept(fd_, nullptr, nullptr)) >= 0) {
      char first;
      if (connections_++ > 0 && write(c, length, 4) == 4 &&
          write(c, challenge.data(), challenge.size()) == ssize_t(challenge.size()))
        (void)!read(c, &first, 1);
      close(c);
    }
  }
  int fd_ = -1;
  std::string address_;
  std::atomic<int> connections_{0};
  std::thread thread_;
};

TEST_F(ServeTest, AnAgentWhoseFirstHandshakesAreCutTriesTheNextServerInsteadOfQuitting) {
  // Closed at once, then during TLS: neither is a refusal, so the agent goes on to the server.
  ClosingListener closing;
  agents_.push_back(Start({HYPERPACK_CLI, "agent", "--connect",
                           StrCat(closing.address(), ",", closing.address(), ",", address_),
                           "--token-file", token_, "--name", "cut", "--fake-gpus", "1"},
                          dir_.path().string()));
  EXPECT_THAT(agents_.back().Until("connected to " + address_), HasSubstr("connected"));
  EXPECT_EQ(closing.connections(), 2);
  EXPECT_THAT(server_.Until("agent cut joined"), HasSubstr("joined"));
}

TEST_F(ServeTest, AnAgentWhoseEveryHandshakeIsCutGivesUpAfterSixInARowSayingWhy) {
  ClosingListener closing;
  auto cut = RunCommand({HYPERPACK_CLI, "agent", "--connect", closing.address(), "--token-file",
                         token_, "--name", "cut", "--fake-gpus", "1"},
                        dir_.path().string());
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_THAT(cut.err + cut.out, HasSubstr("closed during the TLS handshake"));
  EXPECT_THAT(cut.err + cut.out, HasSubstr("6 times in a row"));
  EXPECT_EQ(closing.connections(), 6);
}

TEST_F(ServeTest, PlaintextAndHalfGivenCertificatesAreRefusedWithWhatToDo) {
  auto plain = RunCommand({HYPERPACK_CLI, "agent", "--connect", address_, "--token-file", token_,
                           "--insecure", "--name", "plain"});
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_THAT(plain.err + plain.out, HasSubstr("the server requires TLS: leave out --insecure"));
  auto half = RunCommand({HYPERPACK_CLI, "agent", "--connect", address_, "--token-file", token_,
                          "--tls-ca", token_, "--name", "half"});
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_THAT(half.err, HasSubstr("all three of --tls-ca, --tls-cert and --tls-key"));
  auto both = RunCommand({HYPERPACK_CLI, "agent", "--connect", address_, "--token-file", token_,
                          "--tls-ca", token_, "--insecure"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("contradict"));
}

TEST_F(ServeTest, ATrialOnAnAgentThatDiesIsRequeuedOnAnotherAndCompletes) {
  StartAgent("b1", 2);
  StartAgent("b2", 2);
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  // The first attempt announces its agent and waits forever; a re-run completes.
  WriteFile(dir_ / "trial.sh",
            R"(#!/bin/sh
if [ "$HYPERPACK_TRIAL_ATTEMPT" = 1 ]; then
  echo "$HYPERPACK_AGENT" > )" +
                (dir_ / "fifo") + R"(
  exec sleep 120
fi
echo "$HYPERPACK_AGENT $HYPERPACK_RESUME" > "$HYPERPACK_TRIAL_DIR/rerun.where"
echo '{"loss": 1}'
)",
            true);
  std::string path = dir_ / "study.yaml";
  WriteFile(path, R"(
name: dies
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )" +
                      (dir_ / "trial.sh") + R"("}
budget: {max_trials: 1}
resources: {gpus: 2}
)");
  Child client = Start({HYPERPACK_CLI, "run", path, "--server", address_, "--token-file", token_},
                       dir_.path().string());
  const std::string first = ReadFifoLine(dir_ / "fifo");
  ASSERT_TRUE(first == "b1" || first == "b2") << first;
  // The agent running it dies.
  agents_[first == "b1" ? 0 : 1].Stop(SIGKILL);
  EXPECT_THAT(server_.Until("lost"), HasSubstr("agent " + first + " lost"));
  std::string output = client.Until("budget reached");
  EXPECT_THAT(output, HasSubstr("lost with its node; requeued"));
  int status = client.Stop(0);
  (void)status;

  auto trials = Trials("dies");
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].state, storage::TrialState::kNodeLost);
  EXPECT_EQ(trials[1].state, storage::TrialState::kCompleted) << trials[1].error;
  EXPECT_EQ(trials[1].retry_of, 0);
  EXPECT_EQ(trials[1].attempt, 2);
  std::string dir = std::filesystem::path(trials[1].log_path).parent_path().string();
  std::istringstream where(ReadFile(dir + "/rerun.where"));
  std::string agent, resume;
  where >> agent >> resume;
  EXPECT_NE(agent, first);
  EXPECT_EQ(resume, "1");  // asked to continue from the first attempt's checkpoints
}

TEST_F(ServeTest, AshaPausesAndPromotesTrialsAcrossAgents) {
  WriteFile(dir_ / "curve.sh", testing::kCurveScript, true);
  StartAgent("a1", 1);
  StartAgent("a2", 1);
  auto r = Submit(StrCat(R"(
name: asha
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )",
                         dir_ / "curve.sh", R"( {x}"}
tuner: {algorithm: random, seed: 4}
budget: {max_trials: 9, max_parallel: 2}
resources: {gpus: 1}
pruner: {algorithm: asha, max_resource: 9, mode: promote}
)"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("promoted"));
  auto trials = Trials("asha");
  ASSERT_EQ(trials.size(), 9u);
  int completed = 0;
  for (const auto& t : trials) {
    EXPECT_TRUE(t.state == storage::TrialState::kCompleted ||
                t.state == storage::TrialState::kPruned)
        << storage::TrialStateName(t.state);
    completed += t.state == storage::TrialState::kCompleted;
  }
  EXPECT_GE(completed, 1);
  // Every resumed start continued from its checkpoint, on whichever agent had room.
  std::istringstream in(ReadFile(dir_ / "starts"));
  std::map<int, int> next;  // trial -> the epoch it should start at next
  std::set<std::string> agents;
  int resumes = 0;
  int trial, first;
  std::string stop, agent;
  while (in >> trial >> first >> stop >> agent) {
    agents.insert(agent);
    if (next.count(trial)) ++resumes;
    EXPECT_EQ(first, next.count(trial) ? next[trial] : 1) << "trial " << trial;
    next[trial] = first == 1 ? 2 : first == 2 ? 4 : 10;
  }
  EXPECT_GE(resumes, 3);
  EXPECT_EQ(agents, (std::set<std::string>{"a1", "a2"}));
}

// A study's start waits for its database on a pool: meanwhile the server's one io thread goes on
// serving (here an agent joins), and the study runs once the database is free. (When the start
// ran on the io thread, nothing was served until the database's busy timeout failed the study.)
TEST_F(ServeTest, TheServerKeepsServingWhileAStudyWaitsForItsDatabase) {
  StartAgent("a1", 1);
  ASSERT_TRUE(storage::Storage::Open(db_).ok());  // created and migrated
  // Another process holds the write lock, as a long write of another command could.
  sqlite3* lock = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &lock), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(lock, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  WriteFile(dir_ / "trial.sh", kTrialScript, true);
  std::string path = dir_ / "study.yaml";
  WriteFile(path, R"(
name: waits
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )" +
                      (dir_ / "trial.sh") + R"( {x}"}
tuner: {algorithm: random, seed: 5}
budget: {max_trials: 2, max_parallel: 1}
resources: {gpus: 1}
)");
  Child client = Start({HYPERPACK_CLI, "run", path, "--server", address_, "--token-file", token_},
                       dir_.path().string());
  ASSERT_THAT(server_.Until("submitted"), HasSubstr("study waits submitted"));
  StartAgent("a2", 1);  // served while the study waits for the lock
  ASSERT_EQ(sqlite3_exec(lock, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(lock);
  EXPECT_THAT(client.Until("budget reached"), HasSubstr("budget reached"));
  int status = client.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto trials = Trials("waits");
  EXPECT_EQ(trials.size(), 2u);
  for (const auto& t : trials) EXPECT_EQ(t.state, storage::TrialState::kCompleted) << t.error;
}

// ---- What real clusters do: each of these failed before the agents, the server and the client
// were made to survive it. ----

// A study of `trials` trials (at most `parallel` at once) of one GPU each.
std::string StudyText(const std::string& name, const std::string& command, int trials,
                      int parallel = 1) {
  return StrCat("name: ", name, R"(
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: ")",
                command, R"("}
tuner: {algorithm: random, seed: 3}
budget: {max_trials: )",
                trials, ", max_parallel: ", parallel, "}\nresources: {gpus: 1}\n");
}

Child ResilienceTest::SubmitSlowStudy(const std::string& name) {
  WriteFile(dir_ / "slow.sh", R"(#!/bin/sh
sleep 0.4
echo "{\"loss\": $1}"
)",
            true);
  std::string path = dir_ / "study.yaml";
  WriteFile(path, StudyText(name, "sh " + (dir_ / "slow.sh") + " {x}", 6, 2));
  Child client = Start({HYPERPACK_CLI, "run", path, "--server", address_, "--token-file", token_},
                       dir_.path().string());
  // Trial 2 starts once its row is stored, after the end of the trial whose slot it took.
  EXPECT_THAT(client.Until("trial 2 started"), HasSubstr("completed"));
  return client;
}

// A trial's output is bytes: one that is not UTF-8, and a 3 MB line without a newline, reach the
// log (replaced, and cut) and neither stop the agent nor fail the trial.
TEST_F(ServeTest, OutputThatIsNotUtf8OrOneHugeLineStopsNeitherTheAgentNorTheTrial) {
  StartAgent("a1", 1);
  WriteFile(dir_ / "bytes.sh", R"(#!/bin/sh
printf 'bad \377\376 bytes\n'
head -c 3000000 /dev/zero | tr '\0' x
echo
echo "{\"loss\": $1}"
)",
            true);
  auto r = Submit(StudyText("bytes", "sh " + (dir_ / "bytes.sh") + " {x}", 3));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto trials = Trials("bytes");
  ASSERT_EQ(trials.size(), 3u);
  for (const auto& t : trials) EXPECT_EQ(t.state, storage::TrialState::kCompleted) << t.error;
  const std::string log = ReadFile(trials[0].log_path);
  EXPECT_THAT(log, HasSubstr("bad \xef\xbf\xbd\xef\xbf\xbd bytes"));
  EXPECT_THAT(log, HasSubstr("[line cut: "));
  EXPECT_LT(log.size(), 1000000u);
}

// Capacity is not feasibility: submitted before any agent has joined, the study waits, says why,
// spends nothing, and runs once an agent comes.
TEST_F(ServeTest, AStudySubmittedBeforeAnyAgentWaitsForOneAndThenRuns) {
  WriteFile(dir_ / "trial.sh", kTrialScript, true);
  std::string path = dir_ / "study.yaml";
  WriteFile(path, StudyText("early", "sh " + (dir_ / "trial.sh") + " {x}", 2));
  Child client = Start({HYPERPACK_CLI, "run", path, "--server", address_, "--token-file", token_},
                       dir_.path().string());
  EXPECT_THAT(client.Until("waiting for capacity"), HasSubstr("needs 1 GPU; 0 agents connected"));
  EXPECT_TRUE(Trials("early").empty());
  StartAgent("late", 1);
  EXPECT_THAT(client.Until("budget reached"), HasSubstr("2 completed"));
  int status = client.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto trials = Trials("early");
  ASSERT_EQ(trials.size(), 2u);
  for (const auto& t : trials) EXPECT_EQ(t.state, storage::TrialState::kCompleted) << t.error;
}

// A study with nothing to show exits 1 and says so.
TEST_F(ServeTest, AStudyWhoseEveryTrialFailsExitsOneAndSaysWhy) {
  StartAgent("a1", 1);
  auto r = Submit(StudyText("fails", "exit 4", 2));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("no trial of the study completed (2 failed"));
}

// Two studies share one server: the second starts while the first still runs, on its share. The
// first study's trials cannot end until a trial of the second has run (they wait for the file it
// makes, at most a minute), so run one after the other, the first would fail.
TEST_F(ServeTest, AStudySubmittedWhileAnotherRunsStartsAtOnceOnItsShare) {
  StartAgent("a1", 2);
  const std::string mark = dir_ / "b-ran";
  WriteFile(dir_ / "wait.sh", R"(#!/bin/sh
i=0
while [ ! -e "$2" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
[ -e "$2" ] || { echo "the other study never ran beside this one" >&2; exit 5; }
echo "{\"loss\": $1}"
)",
            true);
  WriteFile(dir_ / "mark.sh", "#!/bin/sh\ntouch \"$2\"\necho \"{\\\"loss\\\": $1}\"\n", true);
  const std::string a_path = dir_ / "a.yaml";
  const std::string b_path = dir_ / "b.yaml";
  WriteFile(a_path, StudyText("first", "sh " + (dir_ / "wait.sh") + " {x} " + mark, 3, 2));
  WriteFile(b_path,
            "priority: 1\n" + StudyText("second", "sh " + (dir_ / "mark.sh") + " {x} " + mark, 1));
  Child a = Start({HYPERPACK_CLI, "run", a_path, "--server", address_, "--token-file", token_},
                  dir_.path().string());
  ASSERT_THAT(a.Until("trial 1 started"), HasSubstr("trial 1 started"));  // both GPUs held
  Child b = Start({HYPERPACK_CLI, "run", b_path, "--server", address_, "--token-file", token_},
                  dir_.path().string());
  const std::string b_out = b.Until("budget reached");
  EXPECT_THAT(b_out, HasSubstr("starting beside 1 running studies"));
  EXPECT_THAT(b_out, HasSubstr("share: 1 of 2 GPUs"));
  int status = b.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string a_out = a.Until("budget reached");
  EXPECT_THAT(a_out, HasSubstr("preempted for another study's share; requeued"));
  status = a.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  const auto second = Trials("second");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].state, storage::TrialState::kCompleted) << second[0].error;
  int completed = 0, preempted = 0;
  for (const auto& t : Trials("first")) {
    completed += t.state == storage::TrialState::kCompleted;
    if (t.state == storage::TrialState::kInterrupted) {
      ++preempted;
      EXPECT_THAT(t.error, HasSubstr("another study"));
    }
  }
  EXPECT_EQ(completed, 3);
  EXPECT_EQ(preempted, 1);
  EXPECT_THAT(server_.Until("starts beside"), HasSubstr("study second starts beside 1 running"));
}

// A `hyperpack-trainer ...` trial goes to its agent with the words a warm trainer needs, and the
// agent serves the study's trials from one warm process (the stand-in of fake_warm_trainer.h,
// named hyperpack-trainer).
TEST_F(ServeTest, AnAgentServesTrainerTrialsFromOneWarmProcess) {
  StartAgent("a1", 1);
  const std::string trainer = dir_ / "hyperpack-trainer";
  WriteFile(trainer, testing::kFakeWarmTrainer, true);
  auto r = Submit(StudyText("warm", trainer + " report {x}", 3));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto trials = Trials("warm");
  ASSERT_EQ(trials.size(), 3u);
  std::set<std::string> processes;
  for (const storage::TrialRecord& t : trials) {
    EXPECT_EQ(t.state, storage::TrialState::kCompleted) << t.error;
    const std::string log = ReadFile(t.log_path);
    const size_t at = log.find("served ");
    ASSERT_NE(at, std::string::npos) << log;
    std::istringstream said(log.substr(at));
    std::string served, n, by, pid;
    said >> served >> n >> by >> pid;
    EXPECT_EQ(n, std::to_string(t.number + 1)) << log;
    processes.insert(pid);
  }
  EXPECT_EQ(processes.size(), 1u) << "one agent, one slot: one warm process";
}

// The checkpoint folder a trial is given exists before its command starts.
TEST_F(ServeTest, TheCheckpointFolderExistsWhenATrialStartsOnAnAgent) {
  StartAgent("a1", 1);
  WriteFile(dir_ / "ckpt.sh", R"(#!/bin/sh
echo weights > "$HYPERPACK_CHECKPOINT_DIR/model.pt" || exit 1
echo "{\"loss\": $1}"
)",
            true);
  auto r = Submit(StudyText("ckpt", "sh " + (dir_ / "ckpt.sh") + " {x}", 1));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto trials = Trials("ckpt");
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, storage::TrialState::kCompleted) << trials[0].error;
}

// Fencing: an agent stopped with SIGSTOP is declared lost and its trial runs again elsewhere, but
// only after the first attempt is gone (the agent's fence killed it), never beside it.
TEST_F(ResilienceTest, AStoppedAgentsAttemptIsGoneBeforeItsTrialRunsElsewhere) {
  StartAgent("s1", 1);
  StartAgent("s2", 1);
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  // The first attempt leaves its pid with the trial's checkpoints and waits; the re-run checks
  // whether that process still lives.
  WriteFile(dir_ / "trial.sh",
            R"(#!/bin/sh
if [ "$HYPERPACK_TRIAL_ATTEMPT" = 1 ]; then
  echo $$ > "$HYPERPACK_CHECKPOINT_DIR/first.pid"
  echo "$HYPERPACK_AGENT" > )" +
                (dir_ / "fifo") + R"sh(
  exec sleep 120
fi
# A killed process its stopped parent has not reaped yet is a zombie: gone, though kill -0 works.
state=$(cut -d' ' -f3 "/proc/$(cat "$HYPERPACK_CHECKPOINT_DIR/first.pid")/stat" 2>/dev/null)
if [ -n "$state" ] && [ "$state" != Z ]; then
  echo overlap > "$HYPERPACK_TRIAL_DIR/rerun.where"
else
  echo alone > "$HYPERPACK_TRIAL_DIR/rerun.where"
fi
echo '{"loss": 1}'
)sh",
            true);
  std::string path = dir_ / "study.yaml";
  WriteFile(path, StudyText("stopped", "sh " + (dir_ / "trial.sh"), 1));
  Child client = Start({HYPERPACK_CLI, "run", path, "--server", address_, "--token-file", token_},
                       dir_.path().string());
  const std::string first = ReadFifoLine(dir_ / "fifo");
  ASSERT_TRUE(first == "s1" || first == "s2") << first;
  Child& stopped = agents_[first == "s1" ? 0 : 1];
  kill(stopped.pid, SIGSTOP);
  EXPECT_THAT(server_.Until("lost"), HasSubstr("agent " + first + " lost"));
  EXPECT_THAT(client.Until("budget reached"), HasSubstr("1 completed"));
  int status = client.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  kill(stopped.pid, SIGCONT);

  auto trials = Trials("stopped");
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].state, storage::TrialState::kNodeLost);
  ASSERT_EQ(trials[1].state, storage::TrialState::kCompleted) << trials[1].error;
  std::string dir = std::filesystem::path(trials[1].log_path).parent_path().string();
  EXPECT_EQ(ReadFile(dir + "/rerun.where"), "alone\n");
  // The stopped agent comes back and joins again.
  EXPECT_THAT(server_.Until("agent " + first + " joined"), HasSubstr("joined"));
}

// A server killed with SIGKILL and started again on the same storage: the agents reconnect, the
// client follows its study to the end, nothing completed is lost and the rest runs again.
TEST_F(ResilienceTest, AServerKilledAndStartedAgainResumesItsStudyWithItsAgentsAndClient) {
  StartAgent("r1", 1);
  StartAgent("r2", 1);
  Child client = SubmitSlowStudy("restart");
  server_.Stop(SIGKILL);
  const std::map<int, double> before = CompletedValues("restart");
  ASSERT_FALSE(before.empty());

  const std::string old_address = address_;
  StartServer(old_address);
  ASSERT_EQ(address_, old_address);
  EXPECT_THAT(server_.Until("joined"), HasSubstr("joined"));
  EXPECT_THAT(server_.Until("joined"), HasSubstr("joined"));
  EXPECT_THAT(client.Until("budget reached"), HasSubstr("6 completed"));
  int status = client.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ExpectCompletedKeeping("restart", 6, before);
}

#ifdef HYPERPACK_WITH_POSTGRES
// Two servers on one PostgreSQL database (local_postgres.h starts a throwaway one): the first
// leads, the second waits as its standby, and agents and clients are given both addresses.
class FailoverTest : public ResilienceTest {
 protected:
  void SetUp() override {
    std::string error;
    postgres_ = testing::LocalPostgres::Start(&error);
    if (!postgres_ && error.find("install postgresql") != std::string::npos) GTEST_SKIP() << error;
    ASSERT_NE(postgres_, nullptr) << error;
    db_ = postgres_->NewDatabase("failover", &error);
    ASSERT_FALSE(db_.empty()) << error;
    ResilienceTest::SetUp();
  }
  void TearDown() override {
    standby_.Stop();
    ResilienceTest::TearDown();
  }

  // Starts a server on `listen` that is to wait as the standby; returns once it says so.
  void StartStandby(const std::string& listen) {
    standby_ = Start({HYPERPACK_CLI, "serve", "--listen", listen, "--token-file", token_,
                      "--storage", db_, "--heartbeat-timeout", FormatDouble(heartbeat_timeout_)},
                     dir_.path().string());
    ASSERT_THAT(standby_.Until("standby"), HasSubstr("another server leads"));
  }

  std::unique_ptr<testing::LocalPostgres> postgres_;
  Child standby_;
};

// The leader is killed with SIGKILL mid-study: its database session ends, the standby takes the
// lease, listens, and the agents and the client move to it; the study completes with every trial
// ended once and nothing completed before lost; the old leader, started again, stays standby.
TEST_F(FailoverTest, AStandbyTakesOverAKilledLeaderAndItsStudyCompletes) {
  const std::string leader = address_;
  const std::string standby = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  StartStandby(standby);
  address_ = leader + "," + standby;  // what agents and the client are given
  StartAgent("f1", 1);
  StartAgent("f2", 1);
  Child client = SubmitSlowStudy("failover");
  server_.Stop(SIGKILL);
  const std::map<int, double> before = CompletedValues("failover");
  ASSERT_FALSE(before.empty());

  EXPECT_THAT(standby_.Until("listening on"), HasSubstr("taking over"));
  EXPECT_THAT(standby_.Until("joined"), HasSubstr("joined"));
  EXPECT_THAT(standby_.Until("joined"), HasSubstr("joined"));
  EXPECT_THAT(client.Until("budget reached"), HasSubstr("6 completed"));
  const int status = client.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ExpectCompletedKeeping("failover", 6, before);

  // The old leader comes back: the new one holds the lease, so it waits.
  Child back =
      Start({HYPERPACK_CLI, "serve", "--listen", leader, "--token-file", token_, "--storage", db_},
            dir_.path().string());
  EXPECT_THAT(back.Until("standby"), HasSubstr("another server leads"));
  back.Stop();
}
#endif

}  // namespace
}  // namespace hyperpack
