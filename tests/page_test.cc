// The study page in a real browser: Debian's chromium, headless, with the network shut off (a proxy
// on a closed loopback port, and no name resolves). Real studies are run with the real CLI, their
// pages written by `hyperpack report`, and each page is loaded: it must render with no error (the
// page counts script errors, rejected promises and Content-Security-Policy violations), every
// chart must hold as many points as the study has trials, and a screenshot must not be blank.
// Skipped when chromium is not installed (scripts/test installs it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <fstream>

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "curve_script.h"
#include "http_util.h"
#include "hyperpack/config_json.h"
#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"
#include "test_util.h"

namespace hyperpack {
namespace {

using nlohmann::json;
using storage::Storage;
using storage::TrialRecord;
using storage::TrialState;
using ::testing::HasSubstr;
using testing::Ran;
using testing::RunCommand;
using testing::StudyYaml;
using testing::TempDir;
using testing::WriteFile;

std::string Chromium() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (std::filesystem::exists(path)) return path;
  return "";
}

// The attributes of the dumped page's <body> tag, unescaped.
std::map<std::string, std::string> BodyAttributes(const std::string& dom) {
  std::map<std::string, std::string> out;
  std::smatch body;
  if (!std::regex_search(dom, body, std::regex("<body([^>]*)>"))) return out;
  const std::string attrs = body[1];
  const std::regex attr("([a-z-]+)=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(attrs.begin(), attrs.end(), attr);
       it != std::sregex_iterator(); ++it) {
    std::string v = (*it)[2];
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}}) {
      for (size_t at = v.find(from); at != std::string::npos; at = v.find(from, at + 1))
        v.replace(at, from.size(), to);
    }
    out[(*it)[1]] = v;
  }
  return out;
}

// How many distinct colours a PNG screenshot holds (8-bit RGB or RGBA, not interlaced, as
// chromium writes them); -1 when it cannot be read.
int DistinctColours(const std::string& png) {
  auto u32 = [&](size_t at) {
    return static_cast<uint32_t>(static_cast<uint8_t>(png[at])) << 24 |
           static_cast<uint32_t>(static_cast<uint8_t>(png[at + 1])) << 16 |
           static_cast<uint32_t>(static_cast<uint8_t>(png[at + 2])) << 8 |
           static_cast<uint32_t>(static_cast<uint8_t>(png[at + 3]));
  };
  if (png.size() < 33 || png.compare(1, 3, "PNG") != 0) return -1;
  const uint32_t width = u32(16), height = u32(20);
  const int depth = png[24], colour = png[25], interlace = png[28];
  if (depth != 8 || (colour != 2 && colour != 6) || interlace != 0) return -1;
  const size_t bpp = colour == 6 ? 4 : 3;
  std::string idat;
  for (size_t at = 8; at + 12 <= png.size();) {
    const uint32_t len = u32(at);
    if (at + 12 + len > png.size()) return -1;
    if (png.compare(at + 4, 4, "IDAT") == 0) idat.append(png, at + 8, len);
    at += 12 + len;
  }
  const size_t stride = width * bpp;
  std::vector<uint8_t> raw(height * (stride + 1));
  uLongf size = raw.size();
  if (uncompress(raw.data(), &size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      size != raw.size())
    return -1;
  // Undo each row's filter (PNG spec, section 9) in place.
  std::vector<uint8_t> prev(stride, 0);
  std::set<uint32_t> colours;
  for (uint32_t y = 0; y < height; ++y) {
    uint8_t* row = &raw[y * (stride + 1) + 1];
    const int filter = row[-1];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= bpp ? row[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
      int add = 0;
      if (filter == 1) add = a;
      if (filter == 2) add = b;
      if (filter == 3) add = (a + b) / 2;
      if (filter == 4) {
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        add = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      row[i] = static_cast<uint8_t>(row[i] + add);
    }
    for (size_t x = 0; x < width; ++x)
      colours.insert(row[x * bpp] << 16 | row[x * bpp + 1] << 8 | row[x * bpp + 2]);
    prev.assign(row, row + stride);
  }
  return static_cast<int>(colours.size());
}

class PageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = Chromium();
    if (chromium_.empty()) GTEST_SKIP() << "chromium is not installed (scripts/test installs it)";
    WriteFile(dir_ / "curve.sh", testing::kCurveScript, true);
    // loss = (x - 0.3)^2 + lr + 0.05 layers; a trial with 4 layers fails, as a real one might.
    WriteFile(dir_ / "score.sh", R"(#!/bin/sh
if [ "$3" = 4 ]; then echo "out of memory with 4 layers" >&2; exit 1; fi
echo "{\"epoch\": 1, \"loss\": $(awk "BEGIN { print ($1 - 0.3)^2 + $2 + 0.05 * $3 }")}"
)",
              true);
  }

  Ran Cli(std::vector<std::string> args) {
    args.insert(args.begin(), HYPERPACK_CLI);
    args.push_back("--storage");
    args.push_back(db_);
    return RunCommand(args, dir_.path().string());
  }

  // Runs the study file `yaml` to its end (a run whose every trial failed exits 1) and writes its
  // page; the page's path.
  std::string RunAndReport(const std::string& name, const std::string& yaml, int exit_code = 0) {
    WriteFile(dir_ / (name + ".yaml"), yaml);
    Ran run = Cli({"run", dir_ / (name + ".yaml")});
    EXPECT_EQ(run.exit_code, exit_code) << run.err;
    const std::string page = dir_ / (name + ".html");
    Ran report = Cli({"report", name, "-o", page});
    EXPECT_EQ(report.exit_code, 0) << report.err;
    return page;
  }

  // Chromium, headless and offline, on `page`, with `extra` flags.
  Ran Browse(const std::string& page, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {chromium_,
                                     "--headless",
                                     "--no-sandbox",  // as root in CI's containers
                                     "--disable-gpu",
                                     "--disable-dev-shm-usage",
                                     "--no-first-run",
                                     "--hide-scrollbars",
                                     "--user-data-dir=" + (dir_ / "profile"),
                                     "--proxy-server=127.0.0.1:" + std::to_string(ClosedPort()),
                                     "--host-resolver-rules=MAP * ~NOTFOUND",
                                     "--window-size=1280,4200",
                                     "--virtual-time-budget=10000"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("file://" + page);
    return RunCommand(args, dir_.path().string());
  }

  // The page's <body> attributes once it has rendered: data-ready, -errors, -blank, -points.
  std::map<std::string, std::string> Render(const std::string& page) {
    Ran dom = Browse(page, {"--dump-dom"});
    EXPECT_EQ(dom.exit_code, 0) << dom.err;
    std::map<std::string, std::string> body = BodyAttributes(dom.out);
    EXPECT_EQ(body["data-ready"], "1") << dom.out.substr(0, 2000);
    EXPECT_EQ(body["data-errors"], "0") << ErrorsIn(dom.out);
    EXPECT_EQ(body["data-blank"], "0");
    return body;
  }

  static std::string ErrorsIn(const std::string& dom) {
    std::smatch m;
    return std::regex_search(dom, m, std::regex("<pre id=\"hp-errors\"[^>]*>([^<]*)<")) ? m[1].str()
                                                                                        : "";
  }

  // A loopback port nothing listens on: the browser's proxy, so that no request leaves.
  static int ClosedPort() { return testing::FreeLoopbackPort(); }

  std::vector<TrialRecord> Trials(const std::string& study) {
    auto db = Storage::Open(db_).value();
    return db->ListTrials(db->FindStudy(study).value()->id).value();
  }

  TempDir dir_;
  std::string db_ = dir_ / "h.db";
  std::string chromium_;
};

constexpr char kGpStudy[] = R"(name: gp
objective: {metric: loss, direction: minimize}
search_space:
  x: {type: float, low: 0, high: 1}
  lr: {type: float, low: 1.0e-4, high: 0.1, log: true}
  layers: {type: int, low: 1, high: 4}
  opt: {type: categorical, values: [sgd, adam]}
trial: {command: "sh score.sh {x} {lr} {layers} {opt}"}
tuner: {algorithm: gp, seed: 3}
budget: {max_trials: 14, max_parallel: 2}
)";

TEST_F(PageTest, AGpStudysPageRendersEveryTrialOfflineWithNoErrors) {
  const std::string page = RunAndReport("gp", kGpStudy);
  std::vector<TrialRecord> trials = Trials("gp");
  ASSERT_EQ(trials.size(), 14u);
  int scored = 0, failed = 0;
  for (const TrialRecord& t : trials) {
    scored += t.value.has_value();
    failed += t.state == TrialState::kFailed;
  }
  ASSERT_GT(scored, 5);

  std::map<std::string, std::string> body = Render(page);
  json points = json::parse(body["data-points"], nullptr, false);
  ASSERT_TRUE(points.is_object()) << body["data-points"];
  EXPECT_EQ(points["trials"], trials.size());
  EXPECT_EQ(points["history"], scored);
  EXPECT_EQ(points["parallel"], scored);
  EXPECT_EQ(points["slices"], scored);
  EXPECT_EQ(points["cost"], scored);
  EXPECT_EQ(points["timeline"], trials.size());  // each ran once, on one CPU slot
  EXPECT_EQ(points["importance"], 4);            // x, lr, layers, opt
  EXPECT_EQ(points["front"], 0);                 // one objective: no front
  EXPECT_EQ(points["curves"], trials.size() - failed);
  EXPECT_GT(points["events"].get<int>(), 0);

  // A screenshot, kept beside the test binary (README shows it), is not blank.
  const std::string shot = std::filesystem::current_path() / "study-page.png";
  std::filesystem::remove(shot);
  Ran shooting = Browse(page, {"--screenshot=" + shot});
  ASSERT_EQ(shooting.exit_code, 0) << shooting.err;
  EXPECT_GT(DistinctColours(testing::ReadFile(shot)), 50);
}

// Two objectives and a constraint: the front section draws a scatter of every completed trial
// (front solid, dominated faded, constraint breakers crossed) and the hypervolume over trials; a
// study with one objective has no such section (the gp study above: its points.front is 0).
TEST_F(PageTest, ATwoObjectiveStudysPageDrawsItsFrontAndItsHypervolume) {
  WriteFile(dir_ / "mo.sh", R"(awk -v x="$1" -v y="$2" 'BEGIN {
  printf "{\"acc\": %.6f, \"ms\": %.6f, \"mem\": %.6f}\n", 1 - (x - 0.2)^2 - y / 4, 5 + 20 * x, y }')");
  const std::string page = RunAndReport("mo", R"(name: mo
objectives:
  - {metric: acc, direction: maximize}
  - {metric: ms, direction: minimize}
constraints: [{metric: mem, max: 0.7}]
search_space:
  x: {type: float, low: 0, high: 1}
  y: {type: float, low: 0, high: 1}
trial: {command: "sh mo.sh {x} {y}"}
tuner: {algorithm: gp, seed: 2}
budget: {max_trials: 14}
)");
  int completed = 0, broken = 0;
  for (const TrialRecord& t : Trials("mo")) {
    completed += t.state == TrialState::kCompleted;
    broken += t.state == TrialState::kCompleted && t.values.at("mem") > 0.7;
  }
  ASSERT_EQ(completed, 14);
  EXPECT_GT(broken, 0) << "the Sobol design should break the constraint somewhere";
  std::map<std::string, std::string> body = Render(page);
  json points = json::parse(body["data-points"], nullptr, false);
  ASSERT_TRUE(points.is_object()) << body["data-points"];
  EXPECT_EQ(points["front"], completed);
  EXPECT_EQ(points["history"], completed);
}

TEST_F(PageTest, AnAshaStudysPageShowsEveryCurveAndEveryStretchOfItsPromotedTrials) {
  const std::string page = RunAndReport(
      "s",
      StrCat("name: s\nobjective: {metric: loss, direction: minimize}\n",
             "search_space: {x: {type: float, low: 0, high: 1}}\n",
             "trial: {command: \"sh curve.sh {x} yes\"}\n",
             "tuner: {algorithm: random, seed: 11}\n", "budget: {max_trials: 9, max_parallel: 1}\n",
             "pruner: {algorithm: asha, min_resource: 1, max_resource: 9, reduction_factor: 3, "
             "mode: promote}\n"));
  std::vector<TrialRecord> trials = Trials("s");
  ASSERT_EQ(trials.size(), 9u);
  std::map<std::string, std::string> body = Render(page);
  json points = json::parse(body["data-points"], nullptr, false);
  ASSERT_TRUE(points.is_object()) << body["data-points"];
  EXPECT_EQ(points["curves"], 9);  // every trial reported at its first rung
  EXPECT_EQ(points["trials"], 9);
  // A promoted trial ran twice: one bar per stretch, more bars than trials.
  EXPECT_GT(points["timeline"].get<int>(), 9);
  const std::string html = testing::ReadFile(page);
  // Trials paused at a rung and promoted later carry the mark where they went on.
  EXPECT_NE(html.find(R"("kind":"promoted")"), std::string::npos);
}

TEST_F(PageTest, AStudyWhoseEveryTrialFailedStillRenders) {
  const std::string page =
      RunAndReport("failing",
                   StudyYaml("failing").Command("sh score.sh {x} 0.01 4").str() +
                       R"(budget: {max_trials: 2, max_parallel: 1}
)",
                   /*exit_code=*/1);
  std::map<std::string, std::string> body = Render(page);
  json points = json::parse(body["data-points"], nullptr, false);
  ASSERT_TRUE(points.is_object()) << body["data-points"];
  EXPECT_EQ(points["trials"], 2);
  EXPECT_EQ(points["history"], 0);
  EXPECT_EQ(points["timeline"], 2);
}

// With budget.rerun_top the page names the best as `hyperpack best` does: the model's pick.
TEST_F(PageTest, ARerunTopStudyShowsTheModelsPickAsItsBest) {
  const std::string page =
      RunAndReport("rr", StudyYaml("rr").Command("sh score.sh {x} 0.0{trial} 1").str() +
                             R"(tuner: {algorithm: sobol, seed: 5}
budget: {max_trials: 12, max_parallel: 1, rerun_top: 2}
)");
  Ran best = Cli({"best", "rr", "--json"});
  ASSERT_EQ(best.exit_code, 0) << best.err;
  const json b = json::parse(best.out);
  ASSERT_EQ(b["chosen_by"], "model");
  Ran dom = Browse(page, {"--dump-dom"});
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  EXPECT_EQ(BodyAttributes(dom.out)["data-errors"], "0") << ErrorsIn(dom.out);
  EXPECT_NE(
      dom.out.find(StrCat(" trial ", b["trial"].get<int>(), ", the model's pick of every run")),
      std::string::npos);
}

// With finalists the page names the best as `hyperpack best` does, the mean of a configuration's
// runs, and marks each finalist with the trial it repeats.
TEST_F(PageTest, AStudyWithFinalistsShowsTheBestMeanAndWhatEachFinalistRepeats) {
  // The lr term is 0.0{trial}: a configuration's second run scores worse than its first.
  const std::string page =
      RunAndReport("fin", StudyYaml("fin").Command("sh score.sh {x} 0.0{trial} 1").str() +
                              R"(tuner: {algorithm: sobol, seed: 5}
budget: {max_trials: 8, max_parallel: 1, finalists: 2}
)");
  Ran best = Cli({"best", "fin", "--json"});
  ASSERT_EQ(best.exit_code, 0) << best.err;
  const json b = json::parse(best.out);
  ASSERT_EQ(b["mean"]["runs"], 2);
  Ran dom = Browse(page, {"--dump-dom"});
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  EXPECT_EQ(BodyAttributes(dom.out)["data-errors"], "0") << ErrorsIn(dom.out);
  const int trial = b["trial"].get<int>();
  auto has = [&](const std::string& text) { return dom.out.find(text) != std::string::npos; };
  EXPECT_TRUE(has(StrCat(" trial ", trial, ", the mean of its configuration's 2 runs")));
  // The best trial's row is marked, and the finalist that repeats it names it.
  std::smatch row;
  ASSERT_TRUE(std::regex_search(
      dom.out, row, std::regex("<tr class=\"hp-best\"><td class=\"hp-num\"[^>]*>(\\d+)")));
  EXPECT_EQ(row[1].str(), std::to_string(trial));
  EXPECT_TRUE(has(
      StrCat("title=\"finalist: trial ", trial, "'s configuration again (budget.finalists)\"")));
  // The curves chart draws the finalists too (from their metrics: the pruner never saw them) and
  // says what their dashed lines are.
  const json points = json::parse(BodyAttributes(dom.out)["data-points"], nullptr, false);
  EXPECT_EQ(points["curves"], 8) << "every trial reported once";
  EXPECT_TRUE(has("<span id=\"hp-curves-finalists\">; dashed: a finalist"));
}

// A page open in chromium, driven over the DevTools protocol (a websocket on loopback): the test
// asks the page itself to wait for what it expects, so nothing here sleeps.
class DevTools {
 public:
  // Chromium on `url`, headless and offline but for loopback; false when it did not come up.
  bool Open(const std::string& chromium, const std::string& profile, const std::string& url) {
    browser_ = std::make_unique<testing::Child>(std::vector<std::string>{
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--no-first-run", "--user-data-dir=" + profile, "--remote-debugging-port=0",
        "--remote-debugging-address=127.0.0.1",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", url});
    std::optional<std::string> line = browser_->WaitForLine("DevTools listening on ws://");
    if (!line) return false;
    // ws://127.0.0.1:PORT/devtools/browser/ID: the page's own endpoint is listed at /json/list.
    std::smatch m;
    if (!std::regex_search(*line, m, std::regex("ws://127\\.0\\.0\\.1:(\\d+)/"))) return false;
    port_ = std::stoi(m[1]);
    json targets = json::parse(testing::HttpGet(port_, "/json/list").body, nullptr, false);
    if (!targets.is_array()) return false;
    for (const json& t : targets) {
      if (t.value("type", "") != "page") continue;
      std::smatch path;
      const std::string ws = t.value("webSocketDebuggerUrl", "");
      if (!std::regex_search(ws, path, std::regex("ws://[^/]+(/.*)"))) continue;
      socket_.next_layer().connect(
          {boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)});
      socket_.handshake("127.0.0.1", path[1].str());
      return true;
    }
    return false;
  }

  // The value of `expression` in the page (a promise is awaited), as JSON. Evaluated again when
  // the page's document changed under it (it was still loading).
  json Evaluate(const std::string& expression) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      json reply = Send(expression);
      const std::string error = reply.contains("error") ? reply["error"].value("message", "") : "";
      if (error.find("context") != std::string::npos) continue;
      if (reply.contains("result") && reply["result"].contains("result") &&
          !reply["result"].contains("exceptionDetails"))
        return reply["result"]["result"].value("value", json());
      ADD_FAILURE() << "the page could not evaluate " << expression << ": " << reply.dump();
      return json();
    }
    ADD_FAILURE() << "the page kept reloading";
    return json();
  }

  ~DevTools() {
    boost::system::error_code ignored;
    socket_.next_layer().close(ignored);
    if (browser_) browser_->Stop(SIGKILL);
  }

 private:
  // Runtime.evaluate's reply.
  json Send(const std::string& expression) {
    const int id = ++id_;
    socket_.write(boost::asio::buffer(
        json({{"id", id},
              {"method", "Runtime.evaluate"},
              {"params",
               {{"expression", expression}, {"awaitPromise", true}, {"returnByValue", true}}}})
            .dump()));
    for (;;) {
      boost::beast::flat_buffer buffer;
      socket_.read(buffer);
      json reply = json::parse(boost::beast::buffers_to_string(buffer.data()), nullptr, false);
      if (reply.is_object() && reply.value("id", 0) == id) return reply;
    }
  }

  std::unique_ptr<testing::Child> browser_;
  boost::asio::io_context io_;
  boost::beast::websocket::stream<boost::asio::ip::tcp::socket> socket_{io_};
  int port_ = 0;
  int id_ = 0;
};

// The number of trials the open page shows once it shows at least `n`, or after `seconds`.
std::string WaitForTrials(int n, int seconds) {
  return StrCat(
      "new Promise((resolve) => { const until = Date.now() + ", seconds * 1000,
      "; const look = () => { const p = document.body && document.body.dataset.points;"
      " const shown = p ? JSON.parse(p).trials : -1;"
      " if (shown >= ",
      n, " || Date.now() > until) resolve(shown); else setTimeout(look, 100); }; look(); })");
}

TEST_F(PageTest, TheDashboardsOpenPageShowsANewTrialWithinSeconds) {
  // Trials 1 and later say "started" through one FIFO and wait on another for the test.
  WriteFile(dir_ / "gate.sh", R"(#!/bin/sh
dir=$(dirname "$0")
if [ "$HYPERPACK_TRIAL_ID" -ge 1 ]; then
  echo "$HYPERPACK_TRIAL_ID" > "$dir/started"
  read go < "$dir/release"
fi
echo "{\"loss\": $1}"
)",
            true);
  ASSERT_EQ(mkfifo((dir_ / "started").c_str(), 0600), 0);
  ASSERT_EQ(mkfifo((dir_ / "release").c_str(), 0600), 0);
  WriteFile(dir_ / "live.yaml", StudyYaml("live").Command("sh gate.sh {x}").str() +
                                    R"(tuner: {algorithm: sobol, seed: 2}
budget: {max_trials: 3, max_parallel: 1}
)");
  testing::Child run({HYPERPACK_CLI, "run", dir_ / "live.yaml", "--storage", db_},
                     dir_.path().string());
  auto next_started = [&] {
    std::ifstream started(dir_ / "started");  // opens when a trial writes: no waiting by time
    std::string n;
    started >> n;
    return n;
  };
  auto release = [&] { std::ofstream(dir_ / "release") << "go\n"; };
  ASSERT_EQ(next_started(), "1");  // trial 0 completed; trial 1 runs

  testing::Child dashboard(
      {HYPERPACK_CLI, "dashboard", "--storage", db_, "--listen", "127.0.0.1:0"},
      dir_.path().string());
  std::optional<std::string> listening = dashboard.WaitForLine(" on http://");
  ASSERT_TRUE(listening) << dashboard.output();
  const std::string url = listening->substr(listening->find("http://"));

  DevTools page;
  ASSERT_TRUE(page.Open(chromium_, dir_ / "live-profile", url + "study/live"));
  EXPECT_EQ(page.Evaluate(WaitForTrials(2, 20)), 2);

  release();                       // trial 1 completes, and trial 2 is placed
  ASSERT_EQ(next_started(), "2");  // its row is stored before its process starts
  EXPECT_EQ(page.Evaluate(WaitForTrials(3, 5)), 3) << "the open page did not show trial 2 in 5 s";
  EXPECT_EQ(page.Evaluate("document.body.dataset.errors"), "0");

  release();
  EXPECT_EQ(run.Wait(), 0) << run.output();
  EXPECT_EQ(dashboard.Stop(SIGTERM), 0);
}

TEST(ReportCliTest, ANameThatIsNoStudyOrNoOutputIsAnErrorThatWritesNothing) {
  TempDir dir;
  Ran none = RunCommand(
      {HYPERPACK_CLI, "report", "nope", "-o", dir / "x.html", "--storage", dir / "h.db"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(dir / "x.html"));
  Ran no_output = RunCommand({HYPERPACK_CLI, "report", "nope", "--storage", dir / "h.db"});
  EXPECT_EQ(no_output.exit_code, 2);
  EXPECT_THAT(no_output.err, ::testing::HasSubstr("-o FILE.html"));
}

}  // namespace
}  // namespace hyperpack
