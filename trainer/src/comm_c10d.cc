// The one file that includes c10d. libtorch 1.13 and 2.x agree on what is used here: TCPStore,
// ProcessGroupGloo(store, rank, size, options) and Work::wait; NCCL only where the libtorch was
// built with it (USE_C10D_NCCL).
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "comm.h"

namespace hyperpack::trainer {
namespace {

class SoloPending : public Pending {
 public:
  void Wait() override {}
};

class Solo : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::unique_ptr<Pending> AllReduceSum(torch::Tensor) override {
    return std::make_unique<SoloPending>();
  }
  std::unique_ptr<Pending> AllToAll(torch::Tensor input, torch::Tensor output) override {
    output.copy_(input);
    return std::make_unique<SoloPending>();
  }
  std::unique_ptr<Pending> AllGather(torch::Tensor input,
                                     std::vector<torch::Tensor> outputs) override {
    outputs.at(0).copy_(input);
    return std::make_unique<SoloPending>();
  }
  void Broadcast(std::vector<torch::Tensor>, int) override {}
  void Barrier() override {}
};

class C10dPending : public Pending {
 public:
  C10dPending(c10::intrusive_ptr<c10d::Work> work, int rank)
      : work_(std::move(work)), rank_(rank) {}
  void Wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      throw CommError("rank " + std::to_string(rank_) + ": a collective failed (a peer died or " +
                      "timed out): " + std::string(e.what()).substr(0, 400));
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  int rank_;
};

template <typename Group>
class C10d : public Communicator {
 public:
  C10d(c10::intrusive_ptr<Group> group, int rank, int size)
      : group_(std::move(group)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }

  std::unique_ptr<Pending> AllReduceSum(torch::Tensor tensor) override {
    std::vector<at::Tensor> tensors = {tensor};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::SUM;
    return std::make_unique<C10dPending>(Guard([&] { return group_->allreduce(tensors, opts); }),
                                         rank_);
  }

  std::unique_ptr<Pending> AllToAll(torch::Tensor input, torch::Tensor output) override {
    std::vector<int64_t> equal_splits;  // empty: equal chunks
    c10d::AllToAllOptions opts;
    return std::make_unique<C10dPending>(
        Guard(
            [&] { return group_->alltoall_base(output, input, equal_splits, equal_splits, opts); }),
        rank_);
  }

  std::unique_ptr<Pending> AllGather(torch::Tensor input,
                                     std::vector<torch::Tensor> outputs) override {
    std::vector<std::vector<at::Tensor>> out = {std::move(outputs)};
    std::vector<at::Tensor> in = {std::move(input)};
    c10d::AllgatherOptions opts;
    return std::make_unique<C10dPending>(Guard([&] { return group_->allgather(out, in, opts); }),
                                         rank_);
  }

  void Broadcast(std::vector<torch::Tensor> tensors, int root) override {
    for (auto& t : tensors) {
      std::vector<at::Tensor> one = {t};
      c10d::BroadcastOptions opts;
      opts.rootRank = root;
      C10dPending(Guard([&] { return group_->broadcast(one, opts); }), rank_).Wait();
    }
  }

  void Barrier() override {
    C10dPending(Guard([&] { return group_->barrier(); }), rank_).Wait();
  }

 private:
  template <typename F>
  c10::intrusive_ptr<c10d::Work> Guard(F launch) {
    try {
      return launch();
    } catch (const std::exception& e) {
      throw CommError("rank " + std::to_string(rank_) + ": " +
                      std::string(e.what()).substr(0, 400));
    }
  }

  c10::intrusive_ptr<Group> group_;
  int rank_, size_;
};

}  // namespace

std::unique_ptr<Communicator> MakeSoloCommunicator() { return std::make_unique<Solo>(); }

std::unique_ptr<Communicator> MakeC10dCommunicator(const Rendezvous& rdv) {
  try {
    c10d::TCPStoreOptions store_opts;
    store_opts.port = static_cast<std::uint16_t>(rdv.master_port);
    store_opts.isServer = rdv.rank == 0;
    store_opts.numWorkers = rdv.world_size;
    store_opts.waitWorkers = true;
    store_opts.timeout = rdv.timeout;
    auto store = c10::make_intrusive<c10d::TCPStore>(rdv.master_addr, store_opts);
#ifdef USE_C10D_NCCL
    if (rdv.use_cuda) {
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = rdv.timeout;
      auto group =
          c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rdv.rank, rdv.world_size, opts);
      return std::make_unique<C10d<c10d::ProcessGroupNCCL>>(group, rdv.rank, rdv.world_size);
    }
#endif
    auto opts = c10d::ProcessGroupGloo::Options::create(rdv.timeout);
    // Loopback for ranks that share this machine's master; the host's name otherwise.
    bool local = rdv.master_addr == "127.0.0.1" || rdv.master_addr == "localhost";
    opts->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                  : c10d::ProcessGroupGloo::createDefaultDevice());
    opts->threads = 2;
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rdv.rank, rdv.world_size, opts);
    return std::make_unique<C10d<c10d::ProcessGroupGloo>>(group, rdv.rank, rdv.world_size);
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError("rank " + std::to_string(rdv.rank) + ": rendezvous at " + rdv.master_addr +
                    ":" + std::to_string(rdv.master_port) +
                    " failed: " + std::string(e.what()).substr(0, 400));
  }
}

}  // namespace hyperpack::trainer
