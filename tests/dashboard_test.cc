// hyperpack dashboard: its routes, token check and transport policy (routes.h, pure), and the real
// server, started by the test on a loopback port over a study the real CLI ran, asked over HTTP,
// and over HTTPS by another TLS client (Python's) with certificates from scripts/cluster-certs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "http_util.h"
#include "local_postgres.h"
#include "routes.h"
#include "test_util.h"

namespace hyperpack::dashboard {
namespace {

using hyperpack::testing::Child;
using hyperpack::testing::HttpGet;
using hyperpack::testing::HttpRaw;
using hyperpack::testing::HttpReply;
using hyperpack::testing::Ran;
using hyperpack::testing::RunCommand;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(DashboardRoutesTest, TargetsAreDecodedAndTheirTokenTakenFromTheQuery) {
  Route page = ParseTarget("/study/my%20study%2Fv2?x=1&token=a%2Bb");
  EXPECT_EQ(page.kind, RouteKind::kStudyPage);
  EXPECT_EQ(page.study, "my study/v2");
  EXPECT_EQ(page.token, "a+b");
  EXPECT_EQ(ParseTarget("/api/study/s").kind, RouteKind::kStudyJson);
  EXPECT_EQ(ParseTarget("/api/studies").kind, RouteKind::kStudiesJson);
  EXPECT_EQ(ParseTarget("/").kind, RouteKind::kIndex);
  EXPECT_EQ(ParseTarget("/study/").kind, RouteKind::kNotFound);
  EXPECT_EQ(ParseTarget("/etc/passwd").kind, RouteKind::kNotFound);
  EXPECT_EQ(ParseTarget("/study/bad%zz").kind, RouteKind::kBadRequest);
  EXPECT_EQ(ParseTarget("/study/nul%00").kind, RouteKind::kBadRequest);
  EXPECT_EQ(ParseTarget("/study/cut%4").kind, RouteKind::kBadRequest);
  std::string back;
  ASSERT_TRUE(UrlDecode(UrlEncode("a b/c?d&e=f%\xff"), &back));
  EXPECT_EQ(back, "a b/c?d&e=f%\xff");
}

TEST(DashboardRoutesTest, TheTokenIsAskedForOnlyWhenThereIsOne) {
  EXPECT_TRUE(Authorized("", "", ""));
  EXPECT_TRUE(Authorized("sekrit-token-123", "Bearer sekrit-token-123", ""));
  EXPECT_TRUE(Authorized("sekrit-token-123", "", "sekrit-token-123"));
  EXPECT_FALSE(Authorized("sekrit-token-123", "", ""));
  EXPECT_FALSE(Authorized("sekrit-token-123", "Bearer sekrit-token-12", ""));
  EXPECT_FALSE(Authorized("sekrit-token-123", "Bearer sekrit-token-1234", ""));
  EXPECT_FALSE(Authorized("sekrit-token-123", "sekrit-token-123", ""));  // no scheme
  EXPECT_FALSE(Authorized("sekrit-token-123", "", "sekrit-token-124"));
}

TEST(DashboardRoutesTest, BeyondLoopbackItIsHttpsWithATokenOrPlainOnlyByChoice) {
  bool warn = true;
  auto chosen = [&](bool loopback, bool token, bool certificate, bool insecure) {
    return ChooseTransport({"h:1", loopback, token, certificate, insecure}, &warn);
  };
  EXPECT_EQ(*chosen(true, false, false, false), Transport::kHttp);
  EXPECT_FALSE(warn);
  EXPECT_EQ(*chosen(true, false, true, false), Transport::kHttps);
  EXPECT_EQ(*chosen(false, true, true, false), Transport::kHttps);
  EXPECT_FALSE(warn);
  EXPECT_EQ(*chosen(false, true, false, true), Transport::kHttp);
  EXPECT_TRUE(warn);
  EXPECT_THAT(chosen(false, true, false, false).status().message(),
              HasSubstr("give --tls-cert and --tls-key"));
  EXPECT_THAT(chosen(false, false, true, false).status().message(), HasSubstr("--token-file"));
  EXPECT_THAT(chosen(false, false, false, true).status().message(), HasSubstr("--token-file"));
  EXPECT_THAT(chosen(true, false, true, true).status().message(), HasSubstr("contradict"));
}

TEST(DashboardRoutesTest, TheIndexEscapesStudyNamesAndLinksWithTheToken) {
  const std::string html = IndexHtml(
      R"([{"study": "<img src=x>", "state": "finished", "trials": {"completed": 3},
          "best": 0.5, "metric": "loss", "direction": "minimize", "created": 0}])",
      "t&k");
  EXPECT_THAT(html, HasSubstr("&lt;img src=x&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("<img")));
  EXPECT_THAT(html, HasSubstr("href=\"/study/%3Cimg%20src%3Dx%3E?token=t%26k\""));
  EXPECT_THAT(html, HasSubstr("3 completed"));
  EXPECT_THAT(IndexHtml("not json", ""), HasSubstr("no studies yet"));
}

constexpr char kStudy[] = R"(name: s
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "echo '{{\"loss\": {x}}}'"}
tuner: {algorithm: sobol, seed: 5}
budget: {max_trials: 4, max_parallel: 2}
)";

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_ / "s.yaml", kStudy);
    Ran run =
        RunCommand({HYPERPACK_CLI, "run", dir_ / "s.yaml", "--storage", db_}, dir_.path().string());
    ASSERT_EQ(run.exit_code, 0) << run.err;
    WriteFile(dir_ / "token", "sekrit-token-0123456789\n");
    chmod((dir_ / "token").c_str(), 0600);
  }

  // Starts `hyperpack dashboard` with `flags`; its port, or 0 when it did not start.
  int Start(std::vector<std::string> flags) {
    std::vector<std::string> argv = {HYPERPACK_CLI, "dashboard", "--storage", db_};
    argv.insert(argv.end(), flags.begin(), flags.end());
    server_ = std::make_unique<Child>(argv, dir_.path().string());
    std::optional<std::string> line = server_->WaitForLine(" on http");
    if (!line) return 0;
    const size_t colon = line->rfind(':');
    return std::stoi(line->substr(colon + 1));
  }

  TempDir dir_;
  std::string db_ = dir_ / "h.db";
  std::unique_ptr<Child> server_;
};

TEST_F(DashboardTest, OnLoopbackItServesTheIndexEachStudysPageAndItsData) {
  const int port = Start({"--listen", "127.0.0.1:0"});
  ASSERT_GT(port, 0) << server_->output();

  HttpReply index = HttpGet(port, "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_THAT(index.body, HasSubstr("href=\"/study/s\""));

  HttpReply page = HttpGet(port, "/study/s");
  EXPECT_EQ(page.status, 200);
  EXPECT_THAT(page.headers, HasSubstr("text/html"));
  EXPECT_THAT(page.body, HasSubstr("data-source=\"/api/study/s\""));

  HttpReply data = HttpGet(port, "/api/study/s");
  ASSERT_EQ(data.status, 200);
  nlohmann::json d = nlohmann::json::parse(data.body, nullptr, false);
  ASSERT_TRUE(d.is_object()) << data.body.substr(0, 500);
  EXPECT_EQ(d["trials"].size(), 4u);
  EXPECT_EQ(d["live"], true);

  HttpReply studies = HttpGet(port, "/api/studies");
  EXPECT_EQ(studies.status, 200);
  EXPECT_THAT(studies.body, HasSubstr("\"study\": \"s\""));

  EXPECT_EQ(HttpGet(port, "/study/nope").status, 404);
  EXPECT_THAT(HttpGet(port, "/study/nope").body, HasSubstr("no study named 'nope'"));
  EXPECT_EQ(HttpGet(port, "/nothing/here").status, 404);
  EXPECT_EQ(HttpRaw(port,
                    "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                    "Connection: close\r\n\r\n")
                .status,
            405);
  EXPECT_EQ(server_->Stop(SIGTERM), 0);
  // Each response was logged, without the query.
  EXPECT_THAT(server_->output(), HasSubstr("GET /api/study/s 200"));
}

#ifdef HYPERPACK_WITH_POSTGRES
// The same dashboard on a study kept in PostgreSQL (a throwaway server: local_postgres.h).
class DashboardOnPostgresTest : public DashboardTest {
 protected:
  void SetUp() override {
    std::string error;
    postgres_ = hyperpack::testing::LocalPostgres::Start(&error);
    if (!postgres_ && error.find("install postgresql") != std::string::npos) GTEST_SKIP() << error;
    ASSERT_NE(postgres_, nullptr) << error;
    db_ = postgres_->NewDatabase("dashboard", &error);
    ASSERT_FALSE(db_.empty()) << error;
    DashboardTest::SetUp();
  }
  void TearDown() override {
    if (server_) server_->Stop(SIGTERM);  // before its database goes
  }

  std::unique_ptr<hyperpack::testing::LocalPostgres> postgres_;
};

TEST_F(DashboardOnPostgresTest, ServesTheStudyAndItsData) {
  const int port = Start({"--listen", "127.0.0.1:0"});
  ASSERT_GT(port, 0) << server_->output();
  EXPECT_THAT(HttpGet(port, "/").body, HasSubstr("href=\"/study/s\""));
  HttpReply data = HttpGet(port, "/api/study/s");
  ASSERT_EQ(data.status, 200);
  nlohmann::json d = nlohmann::json::parse(data.body, nullptr, false);
  ASSERT_TRUE(d.is_object()) << data.body.substr(0, 500);
  EXPECT_EQ(d["trials"].size(), 4u);
  EXPECT_EQ(HttpGet(port, "/study/nope").status, 404);
  EXPECT_EQ(server_->Stop(SIGTERM), 0);
}
#endif

TEST_F(DashboardTest, BadBytesGetABoundedAnswerAndTheServerGoesOn) {
  const int port = Start({"--listen", "127.0.0.1:0"});
  ASSERT_GT(port, 0) << server_->output();
  EXPECT_EQ(HttpRaw(port, "\x16\x03\x01 not http at all\r\n\r\n").status, 400);
  const std::string huge = "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20 * 1024, 'a') +
                           "\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(HttpRaw(port, huge).status, 400);
  EXPECT_EQ(HttpGet(port, "/study/%ff%fe").status, 404);  // not UTF-8: no such study
  EXPECT_EQ(HttpGet(port, "/").status, 200);
}

TEST_F(DashboardTest, BeyondLoopbackItNeedsATokenAndAsksEveryRequestForIt) {
  Ran refused = RunCommand({HYPERPACK_CLI, "dashboard", "--storage", db_, "--listen", "0.0.0.0:0"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("--token-file"));
  Ran plain = RunCommand({HYPERPACK_CLI, "dashboard", "--storage", db_, "--listen", "0.0.0.0:0",
                          "--token-file", dir_ / "token"});
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_THAT(plain.err, HasSubstr("give --tls-cert and --tls-key"));

  // Plain HTTP beyond loopback, by choice.
  const int port = Start({"--listen", "0.0.0.0:0", "--token-file", dir_ / "token", "--insecure"});
  ASSERT_GT(port, 0) << server_->output();
  EXPECT_THAT(server_->output(), HasSubstr("warning: plain HTTP beyond loopback (--insecure)"));
  HttpReply anonymous = HttpGet(port, "/api/study/s");
  EXPECT_EQ(anonymous.status, 401);
  EXPECT_THAT(anonymous.body, Not(HasSubstr("trials")));
  EXPECT_EQ(HttpGet(port, "/").status, 401);
  EXPECT_EQ(HttpGet(port, "/api/study/s?token=wrong-token-0123456789").status, 401);
  EXPECT_EQ(HttpGet(port, "/api/study/s?token=sekrit-token-0123456789").status, 200);
  EXPECT_EQ(
      HttpGet(port, "/api/study/s", "Authorization: Bearer sekrit-token-0123456789\r\n").status,
      200);
  // The page passes the token on when it polls, and the index links carry it.
  HttpReply page = HttpGet(port, "/study/s?token=sekrit-token-0123456789");
  EXPECT_THAT(page.body, HasSubstr("data-source=\"/api/study/s?token=sekrit-token-0123456789\""));
  EXPECT_THAT(HttpGet(port, "/?token=sekrit-token-0123456789").body,
              HasSubstr("/study/s?token=sekrit-token-0123456789"));
  EXPECT_EQ(server_->Stop(SIGTERM), 0);
  EXPECT_THAT(server_->output(), Not(HasSubstr("sekrit")));
}

// An HTTPS GET by Python's ssl module, trusting `ca`, with a client certificate when `name` is
// given: the status and body, or status 0 and the client's error.
HttpReply HttpsGet(int port, const std::string& target, const std::string& ca,
                   const std::string& cert = "", const std::string& key = "") {
  constexpr char kClient[] = R"(
import ssl, sys, urllib.error, urllib.request
port, target, ca, cert, key = sys.argv[1:]
context = ssl.create_default_context(cafile=ca)
if cert:
    context.load_cert_chain(cert, key)
try:
    reply = urllib.request.urlopen(f"https://127.0.0.1:{port}{target}", context=context, timeout=30)
    status, body = reply.status, reply.read()
except urllib.error.HTTPError as e:
    status, body = e.code, e.read()
except Exception as e:
    status, body = 0, repr(e).encode()
print(status)
sys.stdout.write(body.decode())
)";
  Ran ran =
      RunCommand({"/usr/bin/python3", "-c", kClient, std::to_string(port), target, ca, cert, key});
  HttpReply r;
  const size_t nl = ran.out.find('\n');
  if (ran.exit_code != 0 || nl == std::string::npos) {
    r.body = ran.err;
    return r;
  }
  r.status = std::stoi(ran.out.substr(0, nl));
  r.body = ran.out.substr(nl + 1);
  return r;
}

// The dashboard over HTTPS, with a CA and certificates made by the project's own script: the
// server's for 127.0.0.1, a client's, a revoked client's, and another CA's.
class DashboardHttpsTest : public DashboardTest {
 protected:
  void SetUp() override {
    DashboardTest::SetUp();
    const std::string script = std::string(HYPERPACK_SOURCE_DIR) + "/scripts/cluster-certs";
    const std::string certs = certs_.path().string(), other = other_.path().string();
    for (const std::vector<std::string>& argv :
         {std::vector<std::string>{script, certs, "127.0.0.1", "alice", "mallory"},
          std::vector<std::string>{script, "--revoke", certs, "mallory"},
          std::vector<std::string>{script, other, "127.0.0.1"}}) {
      Ran made = RunCommand(argv);
      ASSERT_EQ(made.exit_code, 0) << made.err;
    }
  }
  std::vector<std::string> Https(std::vector<std::string> more = {}) {
    std::vector<std::string> flags = {"--listen",     "0.0.0.0:0",
                                      "--token-file", dir_ / "token",
                                      "--tls-cert",   certs_ / "127.0.0.1.pem",
                                      "--tls-key",    certs_ / "127.0.0.1.key"};
    flags.insert(flags.end(), more.begin(), more.end());
    return flags;
  }

  TempDir certs_, other_;
  const std::string query_ = "?token=sekrit-token-0123456789";
};

TEST_F(DashboardHttpsTest, ServesOverHttpsAndRefusesPlainHttpAndForeignCertificates) {
  const int port = Start(Https());
  ASSERT_GT(port, 0) << server_->output();
  EXPECT_THAT(server_->output(), HasSubstr(" on https://0.0.0.0:"));
  const std::string ca = certs_ / "ca.pem";
  HttpReply data = HttpsGet(port, "/api/study/s" + query_, ca);
  ASSERT_EQ(data.status, 200) << data.body;
  EXPECT_EQ(nlohmann::json::parse(data.body, nullptr, false)["trials"].size(), 4u);
  EXPECT_EQ(HttpsGet(port, "/api/study/s", ca).status, 401);
  // Plain HTTP, token and all: 400, and nothing of the study.
  HttpReply plain = HttpGet(port, "/api/study/s" + query_);
  EXPECT_EQ(plain.status, 400);
  EXPECT_THAT(plain.body, HasSubstr("HTTPS only"));
  EXPECT_THAT(plain.body, Not(HasSubstr("trials")));
  // A client that trusts another CA does not believe this server.
  HttpReply foreign = HttpsGet(port, "/api/study/s" + query_, other_ / "ca.pem");
  EXPECT_EQ(foreign.status, 0);
  EXPECT_THAT(foreign.body, HasSubstr("CERTIFICATE_VERIFY_FAILED"));
  EXPECT_EQ(server_->Stop(SIGTERM), 0);
  EXPECT_THAT(server_->output(), HasSubstr("GET /api/study/s 400 (plain HTTP on the HTTPS port"));
  EXPECT_THAT(server_->output(), HasSubstr("TLS handshake refused"));
  EXPECT_THAT(server_->output(), Not(HasSubstr("sekrit")));
}

TEST_F(DashboardHttpsTest, WithACaEveryClientShowsACertificateThatIsNotRevoked) {
  const int port = Start(Https({"--tls-ca", certs_ / "ca.pem", "--tls-crl", certs_ / "crl.pem"}));
  ASSERT_GT(port, 0) << server_->output();
  const std::string ca = certs_ / "ca.pem";
  HttpReply alice =
      HttpsGet(port, "/api/studies" + query_, ca, certs_ / "alice.pem", certs_ / "alice.key");
  EXPECT_EQ(alice.status, 200) << alice.body;
  EXPECT_THAT(alice.body, HasSubstr("\"study\": \"s\""));
  HttpReply anonymous = HttpsGet(port, "/api/studies" + query_, ca);
  EXPECT_EQ(anonymous.status, 0) << anonymous.body;
  HttpReply revoked =
      HttpsGet(port, "/api/studies" + query_, ca, certs_ / "mallory.pem", certs_ / "mallory.key");
  EXPECT_EQ(revoked.status, 0) << revoked.body;
  EXPECT_EQ(server_->Stop(SIGTERM), 0);
  EXPECT_THAT(server_->output(), HasSubstr("TLS handshake refused"));
  EXPECT_THAT(server_->output(), HasSubstr("revoked"));
}

TEST_F(DashboardHttpsTest, ALooseKeyOrHalfACertificateIsRefusedWithWhatToDo) {
  chmod((certs_ / "127.0.0.1.key").c_str(), 0644);
  std::vector<std::string> argv = {HYPERPACK_CLI, "dashboard", "--storage", db_};
  for (const std::string& flag : Https()) argv.push_back(flag);
  Ran loose = RunCommand(argv);
  EXPECT_EQ(loose.exit_code, 2);
  EXPECT_THAT(loose.err, HasSubstr("chmod 600 " + std::string(certs_ / "127.0.0.1.key")));
  Ran half = RunCommand(
      {HYPERPACK_CLI, "dashboard", "--storage", db_, "--tls-cert", certs_ / "127.0.0.1.pem"});
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_THAT(half.err, HasSubstr("both --tls-cert and --tls-key"));
}

}  // namespace
}  // namespace hyperpack::dashboard
