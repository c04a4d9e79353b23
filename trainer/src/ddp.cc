#include "ddp.h"

namespace hyperpack::trainer {
namespace {

// Collectives move bytes: bf16 travels as fp16-typed storage, since not every backend (Gloo in
// libtorch 1.13) knows bf16 and neither phase interprets the values.
torch::Tensor OnTheWire(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? t.view(torch::kHalf) : t;
}

}  // namespace

GradientSync::GradientSync(std::vector<torch::Tensor> params, Communicator* comm,
                           size_t bucket_bytes, bool overlap, GradCompression compression)
    : params_(std::move(params)), comm_(comm), overlap_(overlap), compression_(compression) {
  const int n = static_cast<int>(params_.size());
  bucket_of_.assign(n, -1);
  slot_of_.assign(n, -1);
  seen_.assign(n, false);
  // Reverse order: the order in which backward produces gradients.
  size_t bytes = 0;
  for (int i = n - 1; i >= 0; --i) {
    const torch::Tensor& p = params_[i];
    if (!p.requires_grad()) continue;
    size_t size = static_cast<size_t>(p.numel()) * p.element_size();
    if (buckets_.empty() || (bucket_bytes > 0 && bytes + size > bucket_bytes && bytes > 0) ||
        bucket_bytes == 0) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    bucket_of_[i] = static_cast<int>(buckets_.size()) - 1;
    slot_of_[i] = static_cast<int>(b.params.size());
    b.offsets.push_back(b.params.empty() ? 0 : b.offsets.back() + params_[b.params.back()].numel());
    b.params.push_back(i);
    bytes += size;
  }
  for (Bucket& b : buckets_) {
    int64_t total = b.offsets.back() + params_[b.params.back()].numel();
    b.flat = torch::zeros({total}, params_[b.params.front()].options());
    if (compression_ != GradCompression::kNone && comm_->world_size() > 1) AllocateWire(b, total);
  }
  for (int i = 0; i < n; ++i) {
    if (bucket_of_[i] < 0) continue;
    params_[i].register_hook([this, i](torch::Tensor grad) { OnGrad(i, grad); });
  }
}

void GradientSync::AllocateWire(Bucket& b, int64_t total) {
  const int64_t w = comm_->world_size();
  if (compression_ == GradCompression::kInt8) {
    b.layout = Int8Layout::For((total + w - 1) / w);
    b.wire = torch::zeros({w * b.layout.bytes()}, b.flat.options().dtype(torch::kInt8));
    b.padded = torch::zeros({w * b.layout.values()}, b.flat.options());
    b.residual = torch::zeros_like(b.padded);
    b.sum_residual = torch::zeros({b.layout.values()}, b.flat.options());
  } else {
    auto type = compression_ == GradCompression::kBf16 ? torch::kBFloat16 : torch::kHalf;
    b.wire = torch::zeros({(total + w - 1) / w * w}, b.flat.options().dtype(type));
  }
  b.received = torch::zeros_like(b.wire);
}

void GradientSync::BeginMicroStep(bool sync) {
  ++micro_steps_;
  syncing_ = sync && comm_->world_size() > 1;
  if (!syncing_) return;
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.pending.reset();
  }
  std::fill(seen_.begin(), seen_.end(), false);
}

void GradientSync::OnGrad(int i, const torch::Tensor& grad) {
  if (!syncing_) return;
  Bucket& b = buckets_[bucket_of_[i]];
  int slot = slot_of_[i];
  auto view = b.flat.narrow(0, b.offsets[slot], params_[i].numel()).view_as(params_[i]);
  torch::NoGradGuard no_grad;
  // The hook sees this micro-step's gradient before it is added to .grad, which holds the
  // earlier micro-steps' sum: the bucket gets the total, already divided by the world size so
  // that nothing is left to do after the all-reduce but copy.
  const double scale = 1.0 / comm_->world_size();
  const torch::Tensor& acc = params_[i].grad();
  if (micro_steps_ > 1 && acc.defined()) {
    torch::add_out(view, acc, grad);
    view.mul_(scale);
  } else {
    torch::mul_out(view, grad, scale);
  }
  if (!seen_[i]) {
    seen_[i] = true;
    if (++b.ready == static_cast<int>(b.params.size()) && overlap_) Launch(b);
  }
}

void GradientSync::Launch(Bucket& b) {
  if (b.pending) return;
  const double w = comm_->world_size();
  if (!b.wire.defined()) {
    bytes_sent_ += 2 * (w - 1) / w * b.flat.nbytes();
    b.pending = comm_->AllReduceSum(b.flat);
    return;
  }
  if (compression_ == GradCompression::kInt8) {
    QuantizeAndSend(b);
  } else {
    b.wire.narrow(0, 0, b.flat.numel()).copy_(b.flat);  // rounded once, here; the padding stays 0
  }
  bytes_sent_ += (w - 1) / w * b.wire.nbytes();
  b.pending = comm_->AllToAll(OnTheWire(b.wire), OnTheWire(b.received));
}

void GradientSync::QuantizeAndSend(Bucket& b) {
  const Int8Layout& l = b.layout;
  b.padded.narrow(0, 0, b.flat.numel()).copy_(b.flat);  // the padding stays 0
  for (int64_t i = 0; i < comm_->world_size(); ++i) {
    QuantizeInt8(b.padded.narrow(0, i * l.values(), l.values()),
                 b.residual.narrow(0, i * l.values(), l.values()), l,
                 b.wire.narrow(0, i * l.bytes(), l.bytes()));
  }
}

torch::Tensor GradientSync::SumInt8(Bucket& b) {
  const Int8Layout& l = b.layout;
  torch::Tensor sum = torch::zeros({l.values()}, b.flat.options());
  for (int64_t i = 0; i < comm_->world_size(); ++i)
    sum += DequantizeInt8(b.received.narrow(0, i * l.bytes(), l.bytes()), l);
  torch::Tensor out = b.wire.narrow(0, comm_->rank() * l.bytes(), l.bytes());
  QuantizeInt8(sum, b.sum_residual, l, out);
  return out;
}

void GradientSync::Unwire(Bucket& b) {
  if (compression_ != GradCompression::kInt8) {
    b.flat.copy_(b.wire.narrow(0, 0, b.flat.numel()));
    return;
  }
  const Int8Layout& l = b.layout;
  for (int64_t i = 0; i < comm_->world_size(); ++i) {
    b.padded.narrow(0, i * l.values(), l.values())
        .copy_(DequantizeInt8(b.wire.narrow(0, i * l.bytes(), l.bytes()), l));
  }
  b.flat.copy_(b.padded.narrow(0, 0, b.flat.numel()));
}

void GradientSync::SumAndGather(Bucket& b) {
  b.pending->Wait();
  const int64_t w = comm_->world_size(), chunk = b.wire.numel() / w;
  torch::Tensor out;
  if (compression_ == GradCompression::kInt8) {
    out = SumInt8(b);
  } else {
    // This rank's chunk of the sum, in fp32, then rounded once more to travel back.
    torch::Tensor mine = b.received.view({w, chunk}).to(torch::kFloat32).sum(0);
    out = b.wire.narrow(0, comm_->rank() * chunk, chunk);
    out.copy_(mine);
  }
  bytes_sent_ += static_cast<double>(w - 1) * out.nbytes();
  std::vector<torch::Tensor> chunks;
  for (int64_t i = 0; i < w; ++i) chunks.push_back(OnTheWire(b.wire.narrow(0, i * chunk, chunk)));
  b.pending = comm_->AllGather(OnTheWire(out).clone(), std::move(chunks));
}

void GradientSync::Finish() {
  micro_steps_ = 0;
  if (!syncing_) return;
  syncing_ = false;
  auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    // A parameter that took no part in this step's graph contributes zeros, on every rank alike.
    for (size_t s = 0; s < b.params.size(); ++s) {
      int i = b.params[s];
      if (!seen_[i]) {
        const torch::Tensor& acc = params_[i].grad();
        auto view = b.flat.narrow(0, b.offsets[s], params_[i].numel()).view_as(params_[i]);
        if (acc.defined()) {
          torch::mul_out(view, acc, 1.0 / comm_->world_size());
        } else {
          view.zero_();
        }
      }
    }
    Launch(b);
  }
  for (Bucket& b : buckets_)
    if (b.wire.defined()) SumAndGather(b);
  for (Bucket& b : buckets_) {
    b.pending->Wait();
    if (b.wire.defined()) Unwire(b);
    for (size_t s = 0; s < b.params.size(); ++s) {
      torch::Tensor& p = params_[b.params[s]];
      auto view = b.flat.narrow(0, b.offsets[s], p.numel()).view_as(p);
      if (p.grad().defined()) {
        p.mutable_grad().copy_(view);
      } else {
        p.mutable_grad() = view.clone();
      }
    }
  }
  exposed_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace hyperpack::trainer
