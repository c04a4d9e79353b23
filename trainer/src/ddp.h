// Data parallelism done as DistributedDataParallel does it: gradients are copied into flat
// buckets as autograd produces them (parameters in reverse order, since backward visits the last
// layer first), and each bucket's all-reduce is launched the moment its last gradient arrives, so
// that communication overlaps the rest of the backward pass. Micro-steps of a gradient
// accumulation communicate nothing; only the last one does, with the accumulated gradient.
//
// With compression (fp16 or bf16) a bucket travels at half the width and is summed in fp32, in
// two phases whose volume is that of one half-width ring all-reduce at any world size: an
// all-to-all hands chunk j of every rank's bucket to rank j, which sums its W chunks in fp32;
// an all-gather then gives every rank every summed chunk. Each gradient is rounded twice (once
// sent, once its sum), never summed in half precision. fp16 overflows above 65504: with loss
// scaling on, such a step is skipped like any other overflow.
// Thread-safety: one training thread; the hooks run inside its backward().
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <vector>

#include "comm.h"
#include "config.h"

namespace hyperpack::trainer {

class GradientSync {
 public:
  // `bucket_bytes` 0 puts every parameter in its own bucket. With overlap off every bucket is
  // reduced after backward instead.
  GradientSync(std::vector<torch::Tensor> params, Communicator* comm, size_t bucket_bytes,
               bool overlap, GradCompression compression = GradCompression::kNone);
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Before backward: whether this micro-step is the last of the step (the one that syncs).
  void BeginMicroStep(bool sync);
  // After the syncing micro-step's backward: launches what is left, waits, and leaves the mean
  // gradient over all ranks in every parameter's .grad.
  void Finish();

  int buckets() const { return static_cast<int>(buckets_.size()); }
  // Seconds spent waiting for all-reduce after backward had finished: communication that did not
  // overlap computation.
  double exposed_comm_seconds() const { return exposed_seconds_; }
  void ResetTimers() { exposed_seconds_ = 0; }

 private:
  struct Bucket {
    std::vector<int> params;       // indices into params_
    std::vector<int64_t> offsets;  // element offsets in flat
    torch::Tensor flat;
    // Compressed: the bucket at the wire's width, padded to a multiple of the world size, and
    // what the all-to-all brings (row i from rank i).
    torch::Tensor wire, received;
    int ready = 0;
    std::unique_ptr<Pending> pending;
  };
  void OnGrad(int param, const torch::Tensor& grad);
  void Launch(Bucket& b);
  // The second phase of a compressed bucket, once its all-to-all is done.
  void SumAndGather(Bucket& b);

  std::vector<torch::Tensor> params_;
  Communicator* comm_;
  bool overlap_;
  GradCompression compression_;
  bool syncing_ = false;
  int micro_steps_ = 0;  // micro-steps since the last Finish: 1 means .grad holds nothing yet
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // param -> bucket
  std::vector<int> slot_of_;    // param -> index in its bucket
  std::vector<bool> seen_;      // param's gradient copied in this step
  double exposed_seconds_ = 0;
};

}  // namespace hyperpack::trainer
