// hyperpack-trainer as its users run it: real processes, real Gloo over loopback, small data.
// The test itself needs no libtorch: parameters come back as raw float32 files (--save-params).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zlib.h>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "hyperpack/text.h"
#include "test_util.h"

namespace hyperpack {
namespace {

using hyperpack::testing::ReadFile;
using hyperpack::testing::RunCommand;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A 3-class table whose classes a small MLP can separate: 480 rows, 6 features.
    std::mt19937_64 rng(11);
    std::normal_distribution<double> n(0.0, 1.0);
    std::ostringstream csv;
    csv << "a,b,c,d,e,f,label\n";
    for (int i = 0; i < 480; ++i) {
      int label = i % 3;
      for (int f = 0; f < 6; ++f) csv << (f == label ? 2.0 : 0.0) + n(rng) << ",";
      csv << "class" << label << "\n";
    }
    csv_ = dir_ / "table.csv";
    WriteFile(csv_, csv.str());
  }

  // Common flags for a deterministic run on the table: no dropout, constant rate, no warm-up.
  std::vector<std::string> Base(const std::string& params_out) {
    return {kTrainer, "--data",         "csv",     "--data-path", csv_,       "--model",
            "mlp",    "--mlp-widths",   "16,8",    "--optimizer", "sgd",      "--momentum",
            "0.9",    "--lr",           "0.05",    "--schedule",  "constant", "--warmup-fraction",
            "0",      "--val-fraction", "0.25",    "--seed",      "5",        "--threads",
            "1",      "--save-params",  params_out};
  }

  static std::vector<float> Params(const std::string& path) {
    std::string bytes = ReadFile(path);
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
  }

  static float MaxDifference(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    float worst = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      worst = std::max(worst, std::fabs(a[i] - b[i]));
    return worst;
  }

  testing::Ran Run(std::vector<std::string> args, std::vector<std::string> more = {}) {
    args.insert(args.end(), more.begin(), more.end());
    return RunCommand(args, dir_.path().string());
  }

  static std::vector<Json> MetricLines(const std::string& out) {
    std::vector<Json> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] == '{') lines.push_back(Json::parse(line));
    return lines;
  }

  static constexpr const char* kTrainer = HYPERPACK_TRAINER;
  TempDir dir_;
  std::string csv_;
};

TEST_F(TrainerTest, TwoRanksWithHalfTheBatchEndWhereOneRankEnds) {
  // Small buckets, so that several all-reduces overlap backward.
  auto one = Run(Base(dir_ / "one.bin"),
                 {"--batch-size", "32", "--epochs", "2", "--nproc", "1", "--bucket-mb", "0.0005"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto two = Run(Base(dir_ / "two.bin"),
                 {"--batch-size", "32", "--epochs", "2", "--nproc", "2", "--bucket-mb", "0.0005"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  auto a = Params(dir_ / "one.bin"), b = Params(dir_ / "two.bin");
  ASSERT_GT(a.size(), 100u);
  EXPECT_LT(MaxDifference(a, b), 1e-5);
  // And the run did train: the parameters moved from their start.
  auto lines = MetricLines(two.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["global_batch"], 32);
  EXPECT_GT(lines[1]["val_accuracy"].get<double>(), 0.6);
  EXPECT_GT(lines[1]["comm_fraction"].get<double>(), 0.0);
}

TEST_F(TrainerTest, AccumulatingFourMicroBatchesEqualsOneBatch) {
  auto whole = Run(Base(dir_ / "whole.bin"), {"--batch-size", "32", "--epochs", "1"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  auto micro = Run(Base(dir_ / "micro.bin"),
                   {"--batch-size", "32", "--grad-accumulation", "4", "--epochs", "1"});
  ASSERT_EQ(micro.exit_code, 0) << micro.err;
  EXPECT_LT(MaxDifference(Params(dir_ / "whole.bin"), Params(dir_ / "micro.bin")), 1e-5);
  // With two ranks and accumulation as well: 2 x 2 x 8 = 32.
  auto both = Run(Base(dir_ / "both.bin"), {"--micro-batch-size", "8", "--grad-accumulation", "2",
                                            "--nproc", "2", "--epochs", "1"});
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_LT(MaxDifference(Params(dir_ / "whole.bin"), Params(dir_ / "both.bin")), 1e-5);
}

TEST_F(TrainerTest, StoppingAfterAnEpochAndResumingEqualsTrainingThrough) {
  // Dropout and a cosine schedule: the checkpoint must carry the RNG and the schedule's position.
  std::vector<std::string> common = {"--batch-size",      "32",  "--epochs",   "3",
                                     "--dropout",         "0.2", "--schedule", "cosine",
                                     "--warmup-fraction", "0.1"};
  auto through = Run(Base(dir_ / "through.bin"), common);
  ASSERT_EQ(through.exit_code, 0) << through.err;
  std::string ckpt = dir_ / "ckpt";
  auto first =
      Run(Base(dir_ / "first.bin"),
          {"--batch-size", "32", "--epochs", "3", "--dropout", "0.2", "--schedule", "cosine",
           "--warmup-fraction", "0.1", "--checkpoint-dir", ckpt, "--stop-at-epoch", "1"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(MetricLines(first.out).size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/checkpoint.pt"));
  auto rest = Run(Base(dir_ / "resumed.bin"),
                  {"--batch-size", "32", "--epochs", "3", "--dropout", "0.2", "--schedule",
                   "cosine", "--warmup-fraction", "0.1", "--checkpoint-dir", ckpt, "--resume"});
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  auto lines = MetricLines(rest.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["epoch"], 2);  // the curve continues where it stopped
  EXPECT_LT(MaxDifference(Params(dir_ / "through.bin"), Params(dir_ / "resumed.bin")), 1e-5);
}

TEST_F(TrainerTest, WhenOneRankDiesTheOtherExitsWithAnError) {
  // Two ranks started as torchrun would start them, so that the test knows their pids.
  const int free_port = testing::FreeLoopbackPort();
  ASSERT_GT(free_port, 0);
  std::string port = std::to_string(free_port);
  int out_pipe[2];
  ASSERT_EQ(pipe(out_pipe), 0);
  std::vector<pid_t> ranks;
  std::vector<std::string> args = Base(dir_ / "x.bin");
  args.insert(args.end(),
              {"--batch-size", "8", "--epochs", "1000", "--metrics-every", "1", "--timeout", "20"});
  for (int r = 0; r < 2; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", "2", 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", "2", 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      if (r == 0) dup2(out_pipe[1], 1);
      close(out_pipe[0]);
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    ranks.push_back(pid);
  }
  close(out_pipe[1]);
  // Wait for training to be under way: rank 0's first metric line.
  std::string first;
  char c;
  while (read(out_pipe[0], &c, 1) == 1 && c != '\n') first += c;
  ASSERT_THAT(first, HasSubstr("train_loss"));
  kill(ranks[1], SIGKILL);
  waitpid(ranks[1], nullptr, 0);
  // Rank 0 notices within seconds (the peer's socket closes), well inside its 20 s timeout.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, ranks[0], 0));
  ASSERT_GE(pidfd, 0);
  pollfd p{pidfd, POLLIN, 0};
  int ready = poll(&p, 1, 30000);
  close(pidfd);
  if (ready != 1) kill(ranks[0], SIGKILL);
  int status = 0;
  waitpid(ranks[0], &status, 0);
  close(out_pipe[0]);
  ASSERT_EQ(ready, 1) << "rank 0 was still running 30 s after its peer died";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
}

// Loss scaling on fp32 (where it changes nothing but can be watched): gradients poisoned with an
// inf at one step, as an fp16 overflow leaves them, through the trainer's test hook.
TEST_F(TrainerTest, AnOverflowedStepIsSkippedAndTheWeightsStayAsTheyWere) {
  std::vector<std::string> scaled = {
      "--batch-size", "64", "--epochs", "1", "--loss-scale", "dynamic", "--loss-scale-window", "2"};
  auto four = Run(Base(dir_ / "four.bin"), scaled);  // the epoch's 5 steps, none skipped
  ASSERT_EQ(four.exit_code, 0) << four.err;
  setenv("HYPERPACK_TRAINER_INJECT_NONFINITE", "4", 1);  // the last step of the epoch
  auto poisoned = Run(Base(dir_ / "poisoned.bin"), scaled);
  unsetenv("HYPERPACK_TRAINER_INJECT_NONFINITE");
  ASSERT_EQ(poisoned.exit_code, 0) << poisoned.err;
  auto clean =
      Run(Base(dir_ / "clean.bin"), {"--batch-size", "64", "--max-steps", "4", "--loss-scale",
                                     "dynamic", "--loss-scale-window", "2"});
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  // Skipping step 4 leaves the weights of 4 clean steps, bit for bit.
  EXPECT_EQ(MaxDifference(Params(dir_ / "poisoned.bin"), Params(dir_ / "clean.bin")), 0.0f);
  EXPECT_GT(MaxDifference(Params(dir_ / "poisoned.bin"), Params(dir_ / "four.bin")), 0.0f);
  auto skipped = MetricLines(poisoned.out).at(0), full = MetricLines(four.out).at(0);
  EXPECT_EQ(skipped["skipped_steps"], 1);
  EXPECT_EQ(full["skipped_steps"], 0);
  // The skip halved the scale that the clean run kept (one clean step into a window of two).
  EXPECT_EQ(skipped["loss_scale"].get<double>() * 2, full["loss_scale"].get<double>());
}

TEST_F(TrainerTest, PowerOfTwoLossScalingChangesNothingInFp32) {
  auto plain = Run(Base(dir_ / "plain.bin"), {"--batch-size", "32", "--epochs", "1"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  auto scaled =
      Run(Base(dir_ / "scaled.bin"), {"--batch-size", "32", "--epochs", "1", "--loss-scale",
                                      "dynamic", "--loss-scale-window", "3"});
  ASSERT_EQ(scaled.exit_code, 0) << scaled.err;
  EXPECT_LT(MaxDifference(Params(dir_ / "plain.bin"), Params(dir_ / "scaled.bin")), 1e-6);
  EXPECT_GT(MetricLines(scaled.out).at(0)["loss_scale"].get<double>(), 65536.0);  // it grew
  EXPECT_FALSE(MetricLines(plain.out).at(0).contains("loss_scale"));
}

TEST_F(TrainerTest, TheLossScaleIsCheckpointedWithTheEpoch) {
  std::vector<std::string> common = {
      "--batch-size", "64", "--epochs", "2", "--loss-scale", "dynamic", "--loss-scale-window", "2"};
  setenv("HYPERPACK_TRAINER_INJECT_NONFINITE", "2", 1);
  auto through = Run(Base(dir_ / "through.bin"), common);
  std::string ckpt = dir_ / "ckpt";
  std::vector<std::string> stop = common, resume = common;
  stop.insert(stop.end(), {"--checkpoint-dir", ckpt, "--stop-at-epoch", "1"});
  resume.insert(resume.end(), {"--checkpoint-dir", ckpt, "--resume"});
  auto first = Run(Base(dir_ / "first.bin"), stop);
  auto rest = Run(Base(dir_ / "rest.bin"), resume);
  unsetenv("HYPERPACK_TRAINER_INJECT_NONFINITE");
  ASSERT_EQ(through.exit_code, 0) << through.err;
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  auto a = MetricLines(through.out).at(1), b = MetricLines(rest.out).at(0);
  EXPECT_EQ(b["epoch"], 2);
  EXPECT_EQ(a["loss_scale"], b["loss_scale"]);
  EXPECT_EQ(b["skipped_steps"], 1);  // counted in epoch 1, carried over
  EXPECT_LT(MaxDifference(Params(dir_ / "through.bin"), Params(dir_ / "rest.bin")), 1e-6);
}

// Buckets sent as bf16, fp16 or int8 and summed in fp32: the run trains as the full-width one
// does, to within the wire's rounding, and not bit-identically (it did travel compressed), sending
// half (or about a quarter) of the bytes each step.
TEST_F(TrainerTest, CompressedGradientsTrainLikeFullWidthOnes) {
  std::vector<std::string> common = {"--batch-size", "32", "--epochs", "2", "--nproc", "2"};
  auto full = Run(Base(dir_ / "full.bin"), common);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  double full_acc = MetricLines(full.out).at(1)["val_accuracy"].get<double>();
  double full_bytes = MetricLines(full.out).at(1)["sent_bytes_per_step"].get<double>();
  EXPECT_GT(full_bytes, 0);
  struct Wire {
    const char* name;
    double bytes_low, bytes_high;  // sent per step, as a fraction of fp32's
  };
  for (Wire w : {Wire{"bf16", 0.49, 0.51}, Wire{"fp16", 0.49, 0.51}, Wire{"int8", 0.25, 0.28}}) {
    const char* wire = w.name;
    std::string out = dir_ / (std::string(wire) + ".bin");
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--grad-compression", wire});
    auto r = Run(Base(out), args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    float diff = MaxDifference(Params(dir_ / "full.bin"), Params(out));
    EXPECT_GT(diff, 0.0f) << wire;
    EXPECT_LT(diff, 0.05f) << wire;
    EXPECT_NEAR(MetricLines(r.out).at(1)["val_accuracy"].get<double>(), full_acc, 0.05) << wire;
    double bytes = MetricLines(r.out).at(1)["sent_bytes_per_step"].get<double>();
    EXPECT_GT(bytes, w.bytes_low * full_bytes) << wire;
    EXPECT_LT(bytes, w.bytes_high * full_bytes) << wire;
  }
}

TEST_F(TrainerTest, BadInputGetsAClearErrorAndTheRightExitCode) {
  auto missing = Run({kTrainer, "--data", "csv", "--data-path", dir_ / "nope.csv"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("nope.csv"));

  auto flag = Run({kTrainer, "--no-such-flag", "1"});
  EXPECT_EQ(flag.exit_code, 1);
  EXPECT_THAT(flag.err, HasSubstr("no-such-flag"));

  auto value = Run({kTrainer, "--data", "csv", "--data-path", csv_, "--optimizer", "adam"});
  EXPECT_EQ(value.exit_code, 1);
  EXPECT_THAT(value.err, HasSubstr("'adam' is not one of sgd, adamw"));
  auto wire = Run({kTrainer, "--data", "csv", "--data-path", csv_, "--grad-compression", "zip"});
  EXPECT_EQ(wire.exit_code, 1);
  EXPECT_THAT(wire.err, HasSubstr("grad_compression: 'zip' is not one of none, fp16, bf16, int8"));
  auto scale = Run({kTrainer, "--data", "csv", "--data-path", csv_, "--loss-scale", "-4"});
  EXPECT_EQ(scale.exit_code, 1);
  EXPECT_THAT(scale.err, HasSubstr("loss_scale: a static loss scale must be a number > 0"));

  WriteFile(dir_ / "bad.csv", "a,label\n1,x\nnot-a-number,y\n");
  auto bad = Run({kTrainer, "--data", "csv", "--data-path", dir_ / "bad.csv"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("bad.csv:3: column 'a': 'not-a-number' is not a number"));

  // Configurations that cannot run are exit 3, so that a tuner learns to avoid them.
  auto big = Run(Base(dir_ / "p.bin"), {"--batch-size", "4096"});
  EXPECT_EQ(big.exit_code, 3);
  EXPECT_THAT(big.err, HasSubstr("larger than the 360 training samples"));
  auto uneven = Run(Base(dir_ / "p.bin"), {"--batch-size", "33", "--nproc", "2"});
  EXPECT_EQ(uneven.exit_code, 3);
  EXPECT_THAT(uneven.err, HasSubstr("not a multiple"));
  auto fp16 = Run(Base(dir_ / "p.bin"), {"--precision", "fp16", "--device", "cpu"});
  EXPECT_EQ(fp16.exit_code, 3);
  EXPECT_THAT(fp16.err, HasSubstr("needs a GPU"));
  // A GPU asked for where there is none (every CI machine; the GPU path is run on a GPU machine).
  if (!std::filesystem::exists("/dev/nvidia0")) {
    auto cuda = Run(Base(dir_ / "p.bin"), {"--device", "cuda"});
    EXPECT_EQ(cuda.exit_code, 3);
    EXPECT_THAT(cuda.err, HasSubstr("device cuda: this libtorch has no CUDA"));
  }
}

// An exported launcher line (export --format torchrun) names no file: the JSON travels in
// HYPERPACK_PARAMS; a parameters file, where one is named, goes first.
TEST_F(TrainerTest, ReadsParametersFromHyperpackParamsWhereNoFileIsNamed) {
  setenv("HYPERPACK_PARAMS", R"({"batch_size": 8, "epochs": 1})", 1);
  auto r = Run({kTrainer, "--data", "csv", "--data-path", csv_, "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = MetricLines(r.out);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["global_batch"], 8);
  WriteFile(dir_ / "params.json", R"({"batch_size": 16, "epochs": 1})");
  setenv("HYPERPACK_PARAMS_FILE", (dir_ / "params.json").c_str(), 1);
  auto from_file = Run({kTrainer, "--data", "csv", "--data-path", csv_, "--threads", "1"});
  unsetenv("HYPERPACK_PARAMS_FILE");
  setenv("HYPERPACK_PARAMS", "[not json", 1);
  auto bad = Run({kTrainer, "--data", "csv", "--data-path", csv_, "--threads", "1"});
  unsetenv("HYPERPACK_PARAMS");
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(MetricLines(from_file.out)[0]["global_batch"], 16);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("$HYPERPACK_PARAMS: expected a JSON object of parameters"));
}

TEST_F(TrainerTest, ReadsParametersFromTheTrialsParameterFile) {
  WriteFile(dir_ / "params.json",
            R"({"learning_rate": 0.02, "batch_size": 16, "optimizer": "adamw",
                "not_a_trainer_key": 5, "epochs": 1})");
  setenv("HYPERPACK_PARAMS_FILE", (dir_ / "params.json").c_str(), 1);
  auto r = Run({kTrainer, "--data", "csv", "--data-path", csv_, "--threads", "1"});
  unsetenv("HYPERPACK_PARAMS_FILE");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = MetricLines(r.out);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["global_batch"], 16);
  for (const char* key : {"train_loss", "val_loss", "val_accuracy", "samples_per_s", "step_time_ms",
                          "comm_fraction", "epoch", "peak_rss_mb"})
    EXPECT_TRUE(lines[0].contains(key)) << key;
}

// An IDX file as Fashion-MNIST's are: magic, dimensions, bytes; gzipped.
void WriteIdx(const std::string& path, std::vector<uint32_t> dims,
              const std::vector<uint8_t>& data) {
  std::string bytes = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) bytes += static_cast<char>((d >> s) & 0xff);
  bytes.append(data.begin(), data.end());
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

TEST_F(TrainerTest, TrainsTheConvnetOnIdxImages) {
  // 200 training and 40 test images: class k is a bright k-th row band.
  auto images = [](int n) {
    std::vector<uint8_t> px(static_cast<size_t>(n) * 784, 0), labels(n);
    for (int i = 0; i < n; ++i) {
      labels[i] = static_cast<uint8_t>(i % 10);
      for (int x = 0; x < 28; ++x) px[i * 784 + (2 + 2 * labels[i]) * 28 + x] = 255;
    }
    return std::make_pair(px, labels);
  };
  std::filesystem::create_directories(dir_ / "fm");
  auto [train_x, train_y] = images(200);
  auto [test_x, test_y] = images(40);
  WriteIdx(dir_ / "fm/train-images-idx3-ubyte.gz", {200, 28, 28}, train_x);
  WriteIdx(dir_ / "fm/train-labels-idx1-ubyte.gz", {200}, train_y);
  WriteIdx(dir_ / "fm/t10k-images-idx3-ubyte.gz", {40, 28, 28}, test_x);
  WriteIdx(dir_ / "fm/t10k-labels-idx1-ubyte.gz", {40}, test_y);
  auto r = Run({kTrainer, "--data", "fmnist", "--data-path", dir_ / "fm", "--model", "cnn",
                "--cnn-channels", "4,8", "--batch-norm", "--epochs", "3", "--batch-size", "20",
                "--lr", "0.05", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = MetricLines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_GT(lines.back()["test_accuracy"].get<double>(), 0.9);

  // A truncated file is named in the error.
  WriteIdx(dir_ / "fm/train-labels-idx1-ubyte.gz", {300}, train_y);
  auto broken = Run({kTrainer, "--data", "fmnist", "--data-path", dir_ / "fm"});
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_THAT(broken.err, HasSubstr("train-labels-idx1-ubyte.gz: expected 300 bytes"));
}

TEST_F(TrainerTest, TrainsTheCharacterModelOnText) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  WriteFile(dir_ / "text.txt", text);
  auto r = Run({kTrainer,
                "--data",
                "text",
                "--data-path",
                dir_ / "text.txt",
                "--model",
                "charlm",
                "--seq-len",
                "32",
                "--d-model",
                "32",
                "--layers",
                "1",
                "--heads",
                "2",
                "--epochs",
                "2",
                "--batch-size",
                "16",
                "--optimizer",
                "adamw",
                "--lr",
                "0.003",
                "--threads",
                "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = MetricLines(r.out);
  ASSERT_EQ(lines.size(), 2u);
  // A repetitive text: far better than guessing among its ~28 characters.
  EXPECT_LT(lines.back()["val_perplexity"].get<double>(), 10.0);
}

TEST_F(TrainerTest, TrainsAUsersTorchScriptModule) {
  // The module is scripted by Debian's python3-torch, as a user would do it.
  std::string module = dir_ / "model.pt";
  std::string script =
      "import torch\n"
      "class Net(torch.nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.a = torch.nn.Linear(6, 12)\n"
      "        self.b = torch.nn.Linear(12, 3)\n"
      "    def forward(self, x):\n"
      "        return self.b(torch.relu(self.a(x)))\n"
      "torch.jit.script(Net()).save('" +
      module + "')\n";
  // torch.jit.script reads the class's source, so the script must be a file.
  WriteFile(dir_ / "make_model.py", script);
  auto made = RunCommand({"/usr/bin/python3", dir_ / "make_model.py"});
  if (made.exit_code != 0) GTEST_SKIP() << "python3-torch cannot script a module: " << made.err;
  auto r =
      Run(Base(dir_ / "p.bin"), {"--model-file", module, "--epochs", "3", "--batch-size", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = MetricLines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_GT(lines.back()["val_accuracy"].get<double>(), 0.6);
  EXPECT_EQ(Params(dir_ / "p.bin").size(), 6u * 12 + 12 + 12 * 3 + 3);

  WriteFile(dir_ / "junk.pt", "not a module");
  auto junk = Run(Base(dir_ / "p.bin"), {"--model-file", dir_ / "junk.pt"});
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_THAT(junk.err, HasSubstr("junk.pt: not a TorchScript module"));
}

// The warm processes that served a study's trials, from the line each served trial's log begins
// with: process id -> how many trials it served. Logs under `logs` (hyperpack_logs/STUDY).
std::map<int, int> WarmProcesses(const std::filesystem::path& logs) {
  std::map<int, int> served;
  const std::regex said("hyperpack-trainer: warm process ([0-9]+), trial ([0-9]+) it serves");
  for (const auto& entry : std::filesystem::recursive_directory_iterator(logs)) {
    if (entry.path().filename() != "output.log") continue;
    std::istringstream log(ReadFile(entry.path()));
    for (std::string line; std::getline(log, line);) {
      std::smatch m;
      if (std::regex_search(line, m, said)) ++served[std::stoi(m[1])];
    }
  }
  return served;
}

// hyperpack-trainer's argv for a run of its own: `flags` (words separated by spaces), then `more`.
std::vector<std::string> TrainerArgs(const std::string& flags, const std::string& more) {
  std::vector<std::string> argv = {HYPERPACK_TRAINER};
  std::istringstream words(flags + " " + more);
  for (std::string w; words >> w;) argv.push_back(w);
  return argv;
}

// A 3-class table of `rows` rows and 3 features that a small MLP can separate.
void WriteSmallTable(const std::string& path, int rows) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n(0.0, 1.0);
  std::ostringstream csv;
  csv << "a,b,c,label\n";
  for (int i = 0; i < rows; ++i) {
    for (int f = 0; f < 3; ++f) csv << (f == i % 3 ? 2.0 : 0.0) + n(rng) << ",";
    csv << "c" << i % 3 << "\n";
  }
  WriteFile(path, csv.str());
}

// Trials served one after another by one warm hyperpack-trainer end with exactly the weights their
// own processes would have (nothing of one trial is left to the next: seeds, threads, data); with
// `trial.warm: false` each has its own process.
// On the CPU: the study's trials ask for no GPU, so they see none, and the runs alone must match.
TEST(TrainerStudyTest, TrialsServedByOneWarmProcessEndExactlyAsTheirOwnProcessesWould) {
  if (std::string(HYPERPACK_CLI).empty()) GTEST_SKIP() << "this build has no hyperpack CLI";
  for (bool warm : {true, false}) {
    SCOPED_TRACE(warm ? "warm" : "cold");
    TempDir dir;
    WriteSmallTable(dir / "t.csv", 300);
    const std::string flags = StrCat(" --data csv --data-path ", dir / "t.csv",
                                     " --model mlp --mlp-widths 8 --epochs 2 --batch-size 30"
                                     " --seed 2 --threads 1 --device cpu");
    WriteFile(
        dir / "s.yaml",
        StrCat("name: s\nobjective: {metric: val_loss, direction: minimize}\n",
               "search_space: {lr: [0.003, 0.1, 0.03, 0.01]}\n", "trial: {command: \"",
               HYPERPACK_TRAINER, flags, " --lr {lr} --save-params {trial_dir}/p.bin\", ",
               "warm: ", warm ? "true" : "false", "}\n",
               "tuner: {algorithm: random, seed: 1}\nbudget: {max_trials: 4, max_parallel: 1}\n"));
    auto run = RunCommand({HYPERPACK_CLI, "run", dir / "s.yaml", "--storage", dir / "h.db"},
                          dir.path().string());
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_THAT(run.out, HasSubstr("4 completed"));
    const std::map<int, int> processes = WarmProcesses(dir / "hyperpack_logs/s");
    if (warm) {
      ASSERT_EQ(processes.size(), 1u) << "one at a time: one warm process";
      EXPECT_EQ(processes.begin()->second, 4);
    } else {
      EXPECT_TRUE(processes.empty());
    }
    for (int trial = 0; trial < 4; ++trial) {
      char name[32];
      std::snprintf(name, sizeof(name), "trial-%04d", trial);
      const std::string trial_dir = dir / ("hyperpack_logs/s/" + std::string(name));
      Json params = Json::parse(ReadFile(trial_dir + "/params.json"));
      auto alone = RunCommand(TrainerArgs(
          flags, StrCat("--lr ", params["lr"].dump(), " --save-params ", dir / "alone.bin")));
      ASSERT_EQ(alone.exit_code, 0) << alone.err;
      const std::string served = ReadFile(trial_dir + "/p.bin");
      ASSERT_FALSE(served.empty()) << name;
      EXPECT_TRUE(served == ReadFile(dir / "alone.bin")) << name << " differs from its own run";
    }
  }
}

// The random tuner's seed under which the study below proposes lr 0.1, the best at epoch 1, last.
constexpr int kInPlaceSeed = 2;

// An ASHA study in promote mode on the real trainer: every trial stops at epoch 1 (its rung), and
// the best goes on to epoch 3, restarted from its checkpoint (in_place: false) or, promoted at the
// rung it has just reached, in the same process (the default); either way it ends exactly where a
// run straight through ends.
TEST(TrainerStudyTest, APromotedTrialEndsWhereARunThroughEndsRestartedOrInPlace) {
  if (std::string(HYPERPACK_CLI).empty()) GTEST_SKIP() << "this build has no hyperpack CLI";
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "restarted");
    TempDir dir;
    WriteSmallTable(dir / "t.csv", 300);
    const std::string flags = StrCat(" --data csv --data-path ", dir / "t.csv",
                                     " --model mlp --mlp-widths 8 --epochs 3 --batch-size 30"
                                     " --schedule cosine --seed 2 --threads 1");
    // The last configuration proposed is the best at epoch 1, so that it is promoted at once.
    WriteFile(dir / "s.yaml",
              StrCat("name: s\nobjective: {metric: val_loss, direction: minimize}\n",
                     "search_space: {lr: [0.003, 0.1, 0.001]}\n", "trial: {command: \"",
                     HYPERPACK_TRAINER, flags, " --lr {lr} --save-params {trial_dir}/p.bin\"}\n",
                     "tuner: {algorithm: random, seed: ", kInPlaceSeed, "}\n",
                     "budget: {max_trials: 3, max_parallel: 1}\n",
                     "pruner: {algorithm: asha, max_resource: 3, mode: promote, in_place: ",
                     in_place ? "true" : "false", "}\n"));
    auto run = RunCommand({HYPERPACK_CLI, "run", dir / "s.yaml", "--storage", dir / "h.db"},
                          dir.path().string());
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_THAT(run.out, HasSubstr("paused at epoch 1"));
    if (in_place) {
      EXPECT_THAT(run.out, HasSubstr("to 3; it goes on in place"));
      EXPECT_THAT(run.out, Not(HasSubstr("resumed from its checkpoint")));
    } else {
      EXPECT_THAT(run.out, HasSubstr("resumed from its checkpoint to epoch 3"));
    }
    auto best = RunCommand({HYPERPACK_CLI, "best", "s", "--storage", dir / "h.db", "--json"});
    ASSERT_EQ(best.exit_code, 0) << best.err;
    Json b = Json::parse(best.out);
    int trial = b["trial"];
    double lr = b["params"]["lr"];
    // Its log holds epochs 1, 2, 3 once each, in one run or two.
    char name[32];
    std::snprintf(name, sizeof(name), "trial-%04d", trial);
    std::string trial_dir = dir / ("hyperpack_logs/s/" + std::string(name));
    std::istringstream log(ReadFile(trial_dir + "/output.log"));
    std::vector<int> epochs;
    int headers = 0;
    for (std::string line; std::getline(log, line);) {
      if (!line.empty() && line[0] == '{') epochs.push_back(Json::parse(line)["epoch"]);
      headers += line.rfind("# hyperpack trial", 0) == 0;
    }
    EXPECT_EQ(epochs, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(headers, in_place ? 1 : 2) << "processes started for the trial";
    // The same configuration straight through.
    auto through = RunCommand(TrainerArgs(
        flags, StrCat("--lr ", FormatShort(lr, 6), " --save-params ", dir / "through.bin")));
    ASSERT_EQ(through.exit_code, 0) << through.err;
    std::string a = ReadFile(trial_dir + "/p.bin"), c = ReadFile(dir / "through.bin");
    ASSERT_EQ(a.size(), c.size());
    ASSERT_FALSE(a.empty());
    std::vector<float> x(a.size() / 4), y(c.size() / 4);
    std::memcpy(x.data(), a.data(), a.size());
    std::memcpy(y.data(), c.data(), c.size());
    float worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
    EXPECT_LT(worst, 1e-5);
    // Every trial, paused by a SIGTERM at its rung or not, was served by one warm process.
    const std::map<int, int> processes = WarmProcesses(dir / "hyperpack_logs/s");
    ASSERT_EQ(processes.size(), 1u) << "a paused trial's SIGTERM ended the warm process";
    EXPECT_EQ(processes.begin()->second, in_place ? 3 : 4);
  }
}

}  // namespace
}  // namespace hyperpack
