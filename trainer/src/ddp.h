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
//
// int8 sends the same two phases as 8-bit integers with an fp32 scale per block of up to 256
// (int8_wire.h): about a quarter of fp32's bytes. Each rank keeps what rounding lost, of its whole
// bucket before the all-to-all and of its own chunk of the sum before the all-gather, and adds it
// to the next step's values (error feedback), so that the error of the sum over many steps stays
// within a rounding step of each phase. The residuals live in memory only: a resumed run starts
// them at zero.
// Thread-safety: one training thread; the hooks run inside its backward().
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <vector>

#include "comm.h"
#include "config.h"
#include "int8_wire.h"

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
  // Bytes this rank has sent since ResetTimers, as the collectives' algorithms move them (a ring
  // all-reduce sends 2(W-1)/W of its tensor; an all-to-all (W-1)/W; an all-gather W-1 copies).
  double bytes_sent() const { return bytes_sent_; }
  void ResetTimers() {
    exposed_seconds_ = 0;
    bytes_sent_ = 0;
  }

 private:
  struct Bucket {
    std::vector<int> params;       // indices into params_
    std::vector<int64_t> offsets;  // element offsets in flat
    torch::Tensor flat;
    // Compressed: the bucket at the wire's width, padded to a multiple of the world size, and
    // what the all-to-all brings (row i from rank i).
    torch::Tensor wire, received;
    // int8: one rank's segment of the wire; the bucket padded to W segments' values; what
    // rounding lost of it, and of this rank's chunk of the sum.
    Int8Layout layout;
    torch::Tensor padded, residual, sum_residual;
    int ready = 0;
    std::unique_ptr<Pending> pending;
  };
  void OnGrad(int param, const torch::Tensor& grad);
  void Launch(Bucket& b);
  // The second phase of a compressed bucket, once its all-to-all is done.
  void SumAndGather(Bucket& b);
  void AllocateWire(Bucket& b, int64_t total);
  void QuantizeAndSend(Bucket& b);
  // int8's SumAndGather: this rank's chunk of the sum, rounded again with its own residual.
  torch::Tensor SumInt8(Bucket& b);
  // The summed bucket, back from the wire into b.flat.
  void Unwire(Bucket& b);

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
  double bytes_sent_ = 0;
};

}  // namespace hyperpack::trainer
