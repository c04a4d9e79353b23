#include "hyperpack/trainer/trainer.h"

#include <dlfcn.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "comm.h"
#include "config.h"
#include "data.h"
#include "ddp.h"
#include "denormals.h"
#include "gpu.h"
#include "hyperpack/env_vars.h"
#include "hyperpack/text.h"
#include "hyperpack/warm.h"
#include "launcher.h"
#include "loss_scaler.h"
#include "models.h"
#include "serve.h"

namespace hyperpack::trainer {
namespace {

using Clock = std::chrono::steady_clock;
using OrderedJson = nlohmann::ordered_json;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitInfeasible = 3;

// A test hook: optimizer steps (0-based, comma-separated) whose gradients are overwritten with an
// inf after the all-reduce, as an fp16 overflow would leave them, so that loss scaling is tested
// end to end on a CPU.
constexpr char kInjectNonFiniteEnv[] = "HYPERPACK_TRAINER_INJECT_NONFINITE";

// A configuration that cannot run: exit code 3, so that the tuner learns where the feasible region
// ends.
struct Infeasible : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A warm process's trial asked to stop by a signal (stop_signal): it ends at once, and the process
// reports it as ended by that signal.
struct Stopped {
  int signal;
};

void ThrowIfStopped() {
  if (const int sig = stop_signal.load(std::memory_order_relaxed)) throw Stopped{sig};
}

// How long a trial at its stop epoch waits to hear whether it goes on in place. The scheduler
// answers in the event that brought the epoch's line, in milliseconds; without an answer the trial
// stops as before (paused, and restarted if promoted).
constexpr auto kControlWait = std::chrono::seconds(10);

// One line from the control socket (env::kControlFd) within `wait`: "continue N" gives N; end of
// file, an error, anything else or silence give 0 (stop here).
int ReadContinue(int fd, std::chrono::milliseconds wait) {
  const auto deadline = Clock::now() + wait;
  std::string line;
  while (line.size() < 64) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    // In a warm process, also the pipe its stop signal's handler writes to.
    pollfd p[2] = {{fd, POLLIN, 0}, {stop_wake_fd.load(), POLLIN, 0}};
    const int ready = poll(p, p[1].fd >= 0 ? 2 : 1, static_cast<int>(left));
    if (stop_signal.load(std::memory_order_relaxed)) return 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0 || !(p[0].revents & (POLLIN | POLLHUP))) return 0;
    // A whole packet where the socket keeps them (a warm process's), else what has arrived.
    char buf[64];
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    const std::string_view got(buf, static_cast<size_t>(n));
    const size_t end = got.find('\n');
    line += got.substr(0, end);
    if (end != std::string_view::npos) break;
  }
  constexpr std::string_view kPrefix = "continue ";
  if (line.compare(0, kPrefix.size(), kPrefix) != 0) return 0;
  auto n = ParseInt(std::string_view(line).substr(kPrefix.size()));
  return n && *n > 0 && *n < 1000000 ? static_cast<int>(*n) : 0;
}

double PeakRssMb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ULL + b;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Linear warm-up, then cosine to zero, constant, or x0.1 at 50% and 75% of the steps.
double LearningRate(const TrainerConfig& c, double base, int64_t step, int64_t total) {
  int64_t warmup = static_cast<int64_t>(c.warmup_fraction * static_cast<double>(total));
  if (step < warmup) return base * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (c.schedule == Schedule::kConstant) return base;
  if (c.schedule == Schedule::kStep) {
    double f = static_cast<double>(step) / static_cast<double>(total);
    return base * (f >= 0.75 ? 0.01 : f >= 0.5 ? 0.1 : 1.0);
  }
  double t = static_cast<double>(step - warmup) /
             static_cast<double>(std::max<int64_t>(1, total - warmup));
  return base * 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, t)));
}

std::set<int64_t> StepsToPoison() {
  std::set<int64_t> steps;
  const char* value = std::getenv(kInjectNonFiniteEnv);
  if (value == nullptr) return steps;
  std::stringstream list(value);
  for (std::string item; std::getline(list, item, ',');)
    if (auto v = ParseInt(item)) steps.insert(*v);
  return steps;
}

// Autocast on for a forward pass, and off again however it ends.
class AutocastScope {
 public:
  AutocastScope(Precision precision, const torch::Device& device)
      : on_(precision != Precision::kFp32),
        device_(device),
        type_(precision == Precision::kBf16 ? at::kBFloat16 : at::kHalf) {
    if (on_) SetAutocast(device_, true, type_);
  }
  ~AutocastScope() {
    if (on_) SetAutocast(device_, false, type_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool on_;
  torch::Device device_;
  at::ScalarType type_;
};

Rendezvous FromEnvironment(double timeout_s) {
  auto get = [](const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoi(v) : fallback;
  };
  Rendezvous r;
  r.rank = get(env::kRank, 0);
  r.world_size = get(env::kWorldSize, 1);
  r.local_rank = get(env::kLocalRank, r.rank);
  r.local_world_size = get(env::kLocalWorldSize, r.world_size);
  if (const char* a = std::getenv(env::kMasterAddr); a && *a) r.master_addr = a;
  r.master_port = get(env::kMasterPort, 29500);
  r.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  return r;
}

class Trainer {
 public:
  Trainer(TrainerConfig config, Rendezvous rdv) : c_(std::move(config)), rdv_(rdv) {}

  int Run() {
    Setup();
    for (int epoch = start_epoch_; epoch < c_.epochs; ++epoch) {
      bool last = epoch + 1 == c_.epochs;
      bool stop = TrainEpoch(epoch);
      OrderedJson line = Evaluate(epoch + 1);
      if ((last || stop) && data_.test && c_.test) line["test_accuracy"] = TestAccuracy();
      // Checkpoint first: a scheduler that pauses the trial on this line finds the epoch saved.
      Checkpoint(epoch + 1);
      if (rank() == 0) std::cout << line.dump() << std::endl;
      if (stop) break;
      if (c_.stop_at_epoch > 0 && epoch + 1 >= c_.stop_at_epoch) {
        const int next = AwaitPromotion(epoch + 1);
        ThrowIfStopped();
        if (next == 0) break;
        c_.stop_at_epoch = next;
      }
    }
    SaveParams();
    comm_->Barrier();
    return kExitOk;
  }

 private:
  int rank() const { return comm_->rank(); }
  int world() const { return comm_->world_size(); }

  // At its stop epoch, a trial with a control socket waits to hear whether it was promoted in
  // place: rank 0 reads the line and every rank gets the answer from it. Returns the epoch to stop
  // at next, or 0 to stop here (no socket, no promotion, or a target that is not ahead).
  int AwaitPromotion(int epoch) {
    const char* fd = std::getenv(env::kControlFd);
    auto number = fd ? ParseInt(fd) : std::nullopt;
    if (!number || *number < 0) return 0;
    int next = rank() == 0 ? ReadContinue(static_cast<int>(*number), kControlWait) : 0;
    if (world() > 1) {
      torch::Tensor t = torch::tensor({static_cast<int64_t>(next)}, torch::kInt64).to(device_);
      comm_->Broadcast({t}, 0);
      next = static_cast<int>(t.cpu().item<int64_t>());
    }
    return next > epoch && next <= c_.epochs ? next : 0;
  }

  // CUDA when asked for or (auto) when this libtorch sees a GPU: each local rank takes device
  // local_rank mod the visible count (one when the scheduler narrowed CUDA_VISIBLE_DEVICES).
  torch::Device ResolveDevice() const {
    const bool cuda = torch::cuda::is_available();
    if (c_.device == DeviceChoice::kCuda && !cuda)
      throw Infeasible("device cuda: this libtorch has no CUDA or no GPU is visible; use cpu");
    if (c_.device == DeviceChoice::kCpu || !cuda) return torch::Device(torch::kCPU);
    const int count = static_cast<int>(torch::cuda::device_count());
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(rdv_.local_rank % count));
  }

  void SetupLossScaling() {
    LossScaleMode mode = c_.loss_scale;
    if (mode == LossScaleMode::kAuto)
      mode = c_.precision == Precision::kFp16 ? LossScaleMode::kDynamic : LossScaleMode::kNone;
    if (mode == LossScaleMode::kNone) return;
    LossScaleOptions options;
    options.dynamic = mode == LossScaleMode::kDynamic;
    if (!options.dynamic) options.initial = c_.static_loss_scale;
    options.growth_interval = c_.loss_scale_window;
    scaler_ = std::make_unique<LossScalePolicy>(options);
  }

  void Setup() {
    device_ = ResolveDevice();
    if (c_.precision == Precision::kFp16 && !device_.is_cuda())
      throw Infeasible("precision fp16 needs a GPU (a CPU has no fp16 autocast); use bf16 or fp32");
    // NCCL between ranks on GPUs of their own; ranks that share a GPU (more local ranks than
    // visible GPUs) use Gloo on its CUDA tensors instead, since NCCL refuses a shared device.
    rdv_.use_cuda = device_.is_cuda() && rdv_.local_world_size <= GpuCount();
    ResetPeakGpu(device_);
    SetupLossScaling();
    poisoned_steps_ = StepsToPoison();
    SetThreads();
    torch::manual_seed(c_.seed);
    auto data = LoadData(c_);
    if (!data.ok()) throw std::runtime_error(data.status().message());
    data_ = std::move(*data);
    if (device_.is_cuda()) data_ = data_.To(device_);  // once, rather than a copy per batch

    // Before the rendezvous: a geometry that cannot run is exit 3 in every rank at once, not a
    // race between one rank leaving and another still connecting to it (which exits 1).
    SetupBatches();
    comm_ = rdv_.world_size > 1 ? MakeC10dCommunicator(rdv_) : MakeSoloCommunicator();
    if (c_.data_parallel > 0 && c_.data_parallel != world())
      throw std::runtime_error(
          StrCat("data_parallel is ", c_.data_parallel, " but ", world(), " ranks were started"));
    SetupModel();
    if (c_.resume) LoadCheckpoint();
  }

  // The CPU slots the scheduler gave this process (HYPERPACK_CPUS), else every core; shared by
  // the local ranks.
  void SetThreads() {
    int cores = static_cast<int>(std::thread::hardware_concurrency());
    if (const char* value = std::getenv(env::kCpus); value && std::atoi(value) > 0)
      cores = std::atoi(value);
    int threads =
        c_.threads > 0 ? c_.threads : std::max(1, cores / std::max(1, rdv_.local_world_size));
    torch::set_num_threads(threads);
    // torch::set_num_threads bounds ATen's own threads, not OpenBLAS's, which would otherwise start
    // one per core in every rank and oversubscribe the machine.
    if (auto set_blas =
            reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
      set_blas(threads);
    // After the pool's size is set, so that its threads take the mode (a warm process's next
    // trial sets its own).
    SetFlushDenormals(c_.flush_denormals);
  }

  // Batch geometry (global = micro x accumulation x ranks), steps, and the scaled learning rate;
  // from the rendezvous's world size, before the communicator exists.
  void SetupBatches() {
    const int ranks = std::max(1, rdv_.world_size);
    micro_ = c_.micro_batch_size;
    if (micro_ == 0) {
      int64_t per = static_cast<int64_t>(c_.grad_accumulation) * ranks;
      if (c_.batch_size % per != 0)
        throw Infeasible(StrCat("batch_size ", c_.batch_size, " is not a multiple of ",
                                c_.grad_accumulation, " accumulation steps x ", ranks, " ranks"));
      micro_ = c_.batch_size / per;
    }
    global_batch_ = micro_ * c_.grad_accumulation * ranks;
    shard_ = data_.train.size() / ranks;
    steps_per_epoch_ = shard_ / (micro_ * c_.grad_accumulation);
    if (steps_per_epoch_ == 0)
      throw Infeasible(StrCat("a global batch of ", global_batch_, " is larger than the ",
                              data_.train.size(), " training samples"));
    total_steps_ = c_.max_steps > 0 ? c_.max_steps : steps_per_epoch_ * c_.epochs;
    base_lr_ = c_.learning_rate;
    double ratio = static_cast<double>(global_batch_) / static_cast<double>(c_.base_batch);
    if (c_.lr_scaling == LrScaling::kLinear) base_lr_ *= ratio;
    if (c_.lr_scaling == LrScaling::kSqrt) base_lr_ *= std::sqrt(ratio);
  }

  // The model on its device with rank 0's weights, its gradient sync and its optimizer.
  void SetupModel() {
    auto model = MakeModel(c_, data_);
    if (!model.ok()) throw std::runtime_error(model.status().message());
    model_ = std::move(*model);
    model_->To(device_);
    params_ = model_->Parameters();
    std::vector<torch::Tensor> state = params_;
    for (auto& b : model_->Buffers()) state.push_back(b);
    {
      torch::NoGradGuard no_grad;
      comm_->Broadcast(state, 0);  // every rank starts from rank 0's weights
    }
    sync_ = std::make_unique<GradientSync>(params_, comm_.get(),
                                           static_cast<size_t>(c_.bucket_mb * 1024 * 1024),
                                           c_.overlap, c_.grad_compression);
    if (c_.optimizer == OptimizerKind::kAdamW) {
      optimizer_ = std::make_unique<torch::optim::AdamW>(
          params_, torch::optim::AdamWOptions(base_lr_).weight_decay(c_.weight_decay));
    } else {
      optimizer_ =
          std::make_unique<torch::optim::SGD>(params_, torch::optim::SGDOptions(base_lr_)
                                                           .momentum(c_.momentum)
                                                           .nesterov(c_.nesterov && c_.momentum > 0)
                                                           .weight_decay(c_.weight_decay));
    }
  }

  torch::Tensor Loss(const torch::Tensor& logits, const torch::Tensor& y) {
    if (data_.sequence)
      return torch::nn::functional::cross_entropy(
          logits.reshape({-1, logits.size(-1)}).to(torch::kFloat32), y.reshape({-1}));
    return torch::nn::functional::cross_entropy(logits.to(torch::kFloat32), y);
  }

  torch::Tensor Forward(const torch::Tensor& x) {
    AutocastScope autocast(c_.precision, device_);
    return model_->Forward(x);
  }

  // After the gradients are summed: unscaled, checked, and whether the optimizer may step.
  bool GradientsUsable() {
    if (poisoned_steps_.count(step_)) {
      torch::NoGradGuard no_grad;
      for (torch::Tensor& p : params_)
        if (p.grad().defined()) {
          p.mutable_grad().view({-1})[0] = std::numeric_limits<float>::infinity();
          break;
        }
    }
    if (!scaler_) return true;
    const double scale = scaler_->scale();
    switch (scaler_->Update(UnscaleGradients(params_, scale))) {
      case StepAction::kApply:
        return true;
      case StepAction::kSkip:
        return false;
      case StepAction::kGiveUp:
        break;
    }
    throw Infeasible(StrCat("the gradients were not finite for ", scaler_->state().skipped_in_a_row,
                            " steps in a row at loss scale ", scale,
                            ": training diverged (a smaller learning_rate?)"));
  }

  // This rank's rows of the epoch: a permutation from (seed, epoch), shared by all ranks, of
  // which rank r takes r, r + W, r + 2W, ...
  torch::Tensor Shard(int epoch) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(Mix(c_.seed, static_cast<uint64_t>(epoch)));
    auto perm = torch::randperm(data_.train.size(), gen, torch::kInt64);
    return perm.slice(0, rank(), shard_ * world(), world());
  }

  // Returns true when max_steps has been reached.
  bool TrainEpoch(int epoch) {
    model_->Train(true);
    torch::Tensor shard = Shard(epoch);
    torch::Tensor loss_total;
    int64_t loss_count = 0;
    if (sync_) sync_->ResetTimers();
    auto start = Clock::now();
    int64_t steps = 0;
    for (int64_t s = 0; s < steps_per_epoch_; ++s) {
      if (c_.max_steps > 0 && step_ >= c_.max_steps) break;
      ThrowIfStopped();
      double lr = LearningRate(c_, base_lr_, step_, total_steps_);
      for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
      for (int m = 0; m < c_.grad_accumulation; ++m) {
        int64_t at = (s * c_.grad_accumulation + m) * micro_;
        Dataset batch = data_.train.Select(shard.slice(0, at, at + micro_));
        if (sync_) sync_->BeginMicroStep(m + 1 == c_.grad_accumulation);
        torch::Tensor loss = Loss(Forward(batch.x), batch.y);
        torch::Tensor objective = c_.grad_accumulation > 1 ? loss / c_.grad_accumulation : loss;
        if (scaler_) objective = objective * scaler_->scale();
        objective.backward();
        // Summed as a tensor and read once per epoch: no synchronising read every step.
        loss_total =
            loss_total.defined() ? loss_total + loss.detach() : loss.detach().to(torch::kFloat64);
        ++loss_count;
      }
      if (sync_) sync_->Finish();
      // A skipped step still advances the schedule: its batches were seen.
      if (GradientsUsable()) {
        if (c_.grad_clip > 0) torch::nn::utils::clip_grad_norm_(params_, c_.grad_clip);
        optimizer_->step();
      }
      // Gradients set to none rather than zero-filled: backward then writes them instead of
      // adding to zeros (libtorch 1.13's zero_grad has no set_to_none).
      for (torch::Tensor& p : params_) p.mutable_grad() = torch::Tensor();
      ++step_;
      ++steps;
      if (c_.metrics_every > 0 && step_ % c_.metrics_every == 0 && rank() == 0) {
        OrderedJson line;
        line["step"] = step_;
        line["epoch"] = epoch + 1;
        line["train_loss"] = loss_total.item<double>() / static_cast<double>(loss_count);
        line["lr"] = lr;
        if (scaler_) line["loss_scale"] = scaler_->scale();
        std::cout << line.dump() << std::endl;
      }
    }
    SynchronizeDevice(device_);  // the GPU's queued work belongs to this epoch's time
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    // Mean training loss over every rank's micro-batches.
    double loss_sum = loss_total.defined() ? loss_total.item<double>() : 0.0;
    auto t = torch::tensor({loss_sum, static_cast<double>(loss_count)}, torch::kFloat64)
                 .to(device_);  // NCCL reduces device tensors only
    comm_->AllReduceSum(t)->Wait();
    epoch_train_loss_ = t[0].item<double>() / std::max(1.0, t[1].item<double>());
    epoch_seconds_ = seconds;
    epoch_steps_ = steps;
    return c_.max_steps > 0 && step_ >= c_.max_steps;
  }

  // Loss and accuracy over a dataset, each rank taking every W-th row, summed over ranks.
  std::pair<double, double> Measure(const Dataset& d) {
    model_->Train(false);
    torch::NoGradGuard no_grad;
    double loss = 0, correct = 0, count = 0;
    auto rows = torch::arange(rank(), d.size(), world(), torch::kInt64);
    const int64_t chunk = 1024;
    for (int64_t at = 0; at < rows.size(0); at += chunk) {
      Dataset b = d.Select(rows.slice(0, at, std::min(at + chunk, rows.size(0))));
      auto logits = Forward(b.x).to(torch::kFloat32);
      auto flat = data_.sequence ? logits.reshape({-1, logits.size(-1)}) : logits;
      auto y = data_.sequence ? b.y.reshape({-1}) : b.y;
      loss += torch::nn::functional::cross_entropy(
                  flat, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                  .item<double>();
      correct += flat.argmax(1).eq(y).sum().item<double>();
      count += static_cast<double>(y.size(0));
    }
    auto t = torch::tensor({loss, correct, count}, torch::kFloat64).to(device_);
    comm_->AllReduceSum(t)->Wait();
    double n = std::max(1.0, t[2].item<double>());
    return {t[0].item<double>() / n, t[1].item<double>() / n};
  }

  OrderedJson Evaluate(int epoch) {
    auto [val_loss, val_acc] = Measure(data_.val);
    OrderedJson line;
    line["epoch"] = epoch;
    line["step"] = step_;
    line["train_loss"] = epoch_train_loss_;
    line["val_loss"] = val_loss;
    if (data_.sequence) {
      line["val_perplexity"] = std::exp(val_loss);
    } else {
      line["val_accuracy"] = val_acc;
    }
    double samples = static_cast<double>(epoch_steps_ * global_batch_);
    line["samples_per_s"] = epoch_seconds_ > 0 ? samples / epoch_seconds_ : 0.0;
    line["step_time_ms"] = epoch_steps_ > 0 ? 1000.0 * epoch_seconds_ / epoch_steps_ : 0.0;
    line["comm_fraction"] =
        epoch_seconds_ > 0 ? sync_->exposed_comm_seconds() / epoch_seconds_ : 0.0;
    // What this rank sent per optimizer step, as the collectives move it (0 with one rank).
    line["sent_bytes_per_step"] = epoch_steps_ > 0 ? sync_->bytes_sent() / epoch_steps_ : 0.0;
    line["lr"] = LearningRate(c_, base_lr_, std::max<int64_t>(0, step_ - 1), total_steps_);
    line["global_batch"] = global_batch_;
    if (scaler_) {
      line["loss_scale"] = scaler_->scale();
      line["skipped_steps"] = scaler_->state().skipped_steps;
    }
    line["peak_rss_mb"] = PeakRssMb();
    if (auto gpu_mb = PeakGpuMb(device_)) line[env::kPeakGpuMetric] = *gpu_mb;
    return line;
  }

  double TestAccuracy() { return Measure(*data_.test).second; }

  std::string CheckpointPath() const {
    return (std::filesystem::path(c_.checkpoint_dir) / "checkpoint.pt").string();
  }

  // Rank 0 writes the model, optimizer, schedule position and RNG state at the end of an epoch:
  // to a temporary file, renamed into place, so that a crash never leaves half a checkpoint.
  void Checkpoint(int epochs_done) {
    if (c_.checkpoint_dir.empty() || rank() != 0) return;
    std::filesystem::create_directories(c_.checkpoint_dir);
    torch::serialize::OutputArchive archive;
    for (size_t i = 0; i < params_.size(); ++i) archive.write("p" + std::to_string(i), params_[i]);
    auto buffers = model_->Buffers();
    for (size_t i = 0; i < buffers.size(); ++i)
      archive.write("b" + std::to_string(i), buffers[i], true);
    torch::serialize::OutputArchive opt;
    optimizer_->save(opt);
    archive.write("optimizer", opt);
    archive.write("epochs_done", torch::tensor(static_cast<int64_t>(epochs_done)), true);
    archive.write("step", torch::tensor(step_), true);
    archive.write("rng", at::detail::getDefaultCPUGenerator().get_state(), true);
    // On a GPU, dropout draws from the device's own generator.
    if (device_.is_cuda()) archive.write("rng_gpu", GpuRngState(device_), true);
    if (scaler_) {
      const LossScalePolicy::State& st = scaler_->state();
      archive.write("loss_scale",
                    torch::tensor({st.scale, static_cast<double>(st.clean_steps),
                                   static_cast<double>(st.skipped_steps),
                                   static_cast<double>(st.skipped_in_a_row)},
                                  torch::kFloat64),
                    true);
    }
    std::string path = CheckpointPath(), tmp = path + ".tmp";
    archive.save_to(tmp);
    std::filesystem::rename(tmp, path);
  }

  void LoadCheckpoint() {
    if (c_.checkpoint_dir.empty())
      throw std::runtime_error(std::string("--resume needs --checkpoint-dir or ") +
                               env::kCheckpointDir);
    std::string path = CheckpointPath();
    if (!std::filesystem::exists(path)) return;  // nothing saved yet: a fresh start
    torch::serialize::InputArchive archive;
    try {
      archive.load_from(path);
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < params_.size(); ++i) {
        torch::Tensor t;
        archive.read("p" + std::to_string(i), t);
        params_[i].copy_(t);
      }
      auto buffers = model_->Buffers();
      for (size_t i = 0; i < buffers.size(); ++i) {
        torch::Tensor t;
        archive.read("b" + std::to_string(i), t, true);
        buffers[i].copy_(t);
      }
      torch::serialize::InputArchive opt;
      archive.read("optimizer", opt);
      optimizer_->load(opt);
      torch::Tensor e, s, rng;
      archive.read("epochs_done", e, true);
      archive.read("step", s, true);
      archive.read("rng", rng, true);
      start_epoch_ = static_cast<int>(e.item<int64_t>());
      step_ = s.item<int64_t>();
      at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle to the global one
      gen.set_state(rng);
      torch::Tensor rng_gpu;  // absent where the checkpoint was written on a CPU
      if (device_.is_cuda() && archive.try_read("rng_gpu", rng_gpu, true))
        SetGpuRngState(device_, rng_gpu);
      // Absent from checkpoints written without loss scaling: the scale then starts afresh.
      torch::Tensor ls;
      if (scaler_ && archive.try_read("loss_scale", ls, true) && ls.numel() == 4) {
        LossScalePolicy::State st;
        st.scale = ls[0].item<double>();
        st.clean_steps = static_cast<int64_t>(ls[1].item<double>());
        st.skipped_steps = static_cast<int64_t>(ls[2].item<double>());
        st.skipped_in_a_row = static_cast<int64_t>(ls[3].item<double>());
        scaler_->Restore(st);
      }
    } catch (const c10::Error& err) {
      throw std::runtime_error(StrCat(path, ": not a checkpoint of this model: ",
                                      std::string(err.what_without_backtrace()).substr(0, 300)));
    }
  }

  // Every parameter, flattened in order, as raw float32: easy to compare from any language.
  void SaveParams() {
    if (c_.save_params.empty() || rank() != 0) return;
    std::vector<torch::Tensor> flat;
    for (auto& p : params_)
      flat.push_back(p.detach().to(torch::kCPU, torch::kFloat32).reshape({-1}));
    torch::Tensor all = torch::cat(flat).contiguous();
    std::ofstream out(c_.save_params, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(all.data_ptr()), all.numel() * sizeof(float));
    if (!out) throw std::runtime_error("cannot write " + c_.save_params);
  }

  TrainerConfig c_;
  Rendezvous rdv_;
  torch::Device device_{torch::kCPU};
  std::unique_ptr<LossScalePolicy> scaler_;  // null: no loss scaling
  std::set<int64_t> poisoned_steps_;
  DataSplits data_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Model> model_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<GradientSync> sync_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  int64_t micro_ = 0, global_batch_ = 0, shard_ = 0, steps_per_epoch_ = 0, total_steps_ = 0;
  double base_lr_ = 0;
  int start_epoch_ = 0;
  int64_t step_ = 0;
  double epoch_train_loss_ = 0, epoch_seconds_ = 0;
  int64_t epoch_steps_ = 0;
};

bool OutOfMemory(const std::string& what) {
  return what.find("out of memory") != std::string::npos ||
         what.find("DefaultCPUAllocator: can't allocate") != std::string::npos ||
         what.find("CUDA error: out of memory") != std::string::npos;
}

}  // namespace

int TrainerMain(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == warm::kServeFlag) return Serve();
  return RunTrial(argc, argv);
}

int RunTrial(int argc, char** argv) {
  auto config = ParseConfig(argc, argv);
  if (!config.ok()) {
    if (config.status().code() == StatusCode::kCancelled) {
      std::cout << config.status().message();
      return kExitOk;
    }
    std::cerr << "hyperpack-trainer: " << config.status().message() << "\n";
    return kExitFailure;
  }
  Rendezvous rdv = FromEnvironment(config->timeout_s);
  // Started by a launcher (torchrun, srun, hyperpack's scheduler, or ourselves) when WORLD_SIZE is
  // set; otherwise start our own ranks when more than one is asked for.
  if (std::getenv(env::kWorldSize) == nullptr) {
    int n = config->nproc > 0 ? config->nproc : std::max(1, config->data_parallel);
    if (n > 1) return LaunchLocalRanks(n, argc, argv);
  }
  int rank = rdv.rank;
  try {
    return Trainer(*config, rdv).Run();
  } catch (const Stopped& stopped) {
    return 128 + stopped.signal;
  } catch (const Infeasible& e) {
    std::cerr << "hyperpack-trainer: rank " << rank
              << ": this configuration cannot run: " << e.what() << "\n";
    return kExitInfeasible;
  } catch (const std::bad_alloc&) {
    std::cerr << "hyperpack-trainer: rank " << rank << ": out of memory\n";
    return kExitInfeasible;
  } catch (const CommError& e) {
    std::cerr << "hyperpack-trainer: " << e.what() << "\n";
    return kExitFailure;
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    std::cerr << "hyperpack-trainer: rank " << rank << ": " << what.substr(0, 600) << "\n";
    return OutOfMemory(what) ? kExitInfeasible : kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "hyperpack-trainer: rank " << rank << ": " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace hyperpack::trainer
