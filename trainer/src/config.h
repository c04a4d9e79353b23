// hyperpack-trainer's configuration: defaults, then the trial's parameter file
// (HYPERPACK_PARAMS_FILE or --params-file, JSON with the names below), then flags.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hyperpack/status.h"

namespace hyperpack::trainer {

// The names each choice has in a parameter file and on the command line: config.cc's tables, parsed
// there once; Name() gives them back for messages.
enum class ModelKind { kMlp, kCnn, kCharLm };
enum class DataKind { kFmnist, kCsv, kText };
enum class LrScaling { kNone, kLinear, kSqrt };  // against base_batch
enum class Schedule { kCosine, kConstant, kStep };
enum class OptimizerKind { kSgd, kAdamW };
enum class Precision { kFp32, kBf16, kFp16 };
// How gradient buckets travel between ranks (ddp.h): at full width, as fp16 or bf16, or as int8
// with a scale per block and error feedback.
enum class GradCompression { kNone, kFp16, kBf16, kInt8 };
enum class DeviceChoice { kAuto, kCpu, kCuda };  // auto: CUDA when this libtorch sees a GPU
// kAuto: dynamic with fp16, none otherwise.
enum class LossScaleMode { kAuto, kNone, kDynamic, kStatic };

struct TrainerConfig {
  // Model.
  ModelKind model = ModelKind::kMlp;
  std::string model_file;  // a TorchScript module to train instead
  std::vector<int64_t> mlp_widths = {256, 128};
  double dropout = 0.0;
  std::vector<int64_t> cnn_channels = {32, 64};
  bool batch_norm = false;
  int64_t seq_len = 64, d_model = 128, layers = 2, heads = 4;  // charlm

  // Data.
  DataKind data = DataKind::kFmnist;
  std::string data_path;      // default for fmnist: /usr/share/datasets/fashion-mnist
  std::string label_column;   // csv: default the last column
  int64_t train_samples = 0;  // 0: all
  double val_fraction = 0.1;  // held out of the training data
  bool test = true;           // fmnist: test accuracy on the test set at the end

  // Parallelism and batch.
  int data_parallel = 0;         // world size; 0: WORLD_SIZE, or 1
  int64_t micro_batch_size = 0;  // per rank per micro-step; 0: from batch_size
  int64_t batch_size = 64;       // global batch, used when micro_batch_size is 0
  int grad_accumulation = 1;
  double bucket_mb = 4.0;  // all-reduce bucket size
  bool overlap = true;     // launch each bucket as soon as its gradients are ready

  // Optimisation.
  double learning_rate = 0.01;
  LrScaling lr_scaling = LrScaling::kNone;
  int64_t base_batch = 256;
  double warmup_fraction = 0.05;
  Schedule schedule = Schedule::kCosine;
  OptimizerKind optimizer = OptimizerKind::kSgd;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  Precision precision = Precision::kFp32;  // fp16 needs CUDA
  LossScaleMode loss_scale = LossScaleMode::kAuto;
  double static_loss_scale = 0;      // kStatic's scale
  int64_t loss_scale_window = 2000;  // clean steps before a dynamic scale doubles
  GradCompression grad_compression = GradCompression::kNone;
  DeviceChoice device = DeviceChoice::kAuto;
  double grad_clip = 0.0;  // max gradient norm; 0: off
  int epochs = 3;
  int64_t max_steps = 0;  // 0: by epochs
  int stop_at_epoch = 0;  // stop (checkpointed) after this epoch, resume later
  uint64_t seed = 0;
  int threads = 0;              // intra-op threads per rank; 0: cores / ranks
  bool flush_denormals = true;  // subnormal floats on the CPU as zero (denormals.h)

  // Output.
  int64_t metrics_every = 0;   // also every N optimizer steps; 0: per epoch only
  std::string checkpoint_dir;  // default HYPERPACK_CHECKPOINT_DIR
  bool resume = false;
  std::string save_params;  // rank 0 writes the final parameters (raw float32)
  double timeout_s = 30.0;  // collectives and rendezvous
  int nproc = 0;            // start this many local ranks; 0: data_parallel
};

// Parses argv (argv[0] is the program), reading the parameter file when there is one. Errors say
// which flag or key and what was expected; "help" is returned as a Status with code kCancelled and
// the help text as its message.
Result<TrainerConfig> ParseConfig(int argc, char** argv);

// A choice's name as a parameter file spells it.
const char* Name(ModelKind model);
const char* Name(DataKind data);

}  // namespace hyperpack::trainer
