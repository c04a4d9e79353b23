// Communication between the ranks of one data-parallel trainer, behind our own interface: the
// only place that sees c10d is comm_c10d.cc, so that libtorch 1.13 (ProcessGroup) and 2.x
// (Backend) both compile and tests can put another implementation in.
//
// Every collective must be called by every rank in the same order. Failures (a peer that died, a
// timeout) are thrown as CommError from the call or from Pending::Wait.
// Thread-safety: a Communicator is used by one thread (the training loop and the autograd hooks
// it runs); the work it launches proceeds on the backend's own threads.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace hyperpack::trainer {

class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A collective in flight.
class Pending {
 public:
  virtual ~Pending() = default;
  virtual void Wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In-place sum over the ranks, started now and finished by Wait.
  virtual std::unique_ptr<Pending> AllReduceSum(torch::Tensor tensor) = 0;
  // Equal chunks exchanged: chunk j of `input` goes to rank j, and chunk i of `output` comes from
  // rank i. Both are 1-D, contiguous, of the same size and type, a multiple of world_size long.
  virtual std::unique_ptr<Pending> AllToAll(torch::Tensor input, torch::Tensor output) = 0;
  // outputs[i] receives rank i's `input` (world_size tensors shaped and typed like it).
  virtual std::unique_ptr<Pending> AllGather(torch::Tensor input,
                                             std::vector<torch::Tensor> outputs) = 0;
  // In-place copy of rank `root`'s tensors to every rank.
  virtual void Broadcast(std::vector<torch::Tensor> tensors, int root) = 0;
  virtual void Barrier() = 0;
};

// Where the ranks meet: torchrun's variables.
struct Rendezvous {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::chrono::milliseconds timeout{30000};
  bool use_cuda = false;  // NCCL between GPUs when the libtorch has it
};

// A single rank: collectives are no-ops.
std::unique_ptr<Communicator> MakeSoloCommunicator();
// c10d: a TCPStore at master_addr:master_port (rank 0 serves it), then Gloo (CPU) or NCCL (CUDA).
// Throws CommError when the rendezvous fails or times out.
std::unique_ptr<Communicator> MakeC10dCommunicator(const Rendezvous& rdv);

}  // namespace hyperpack::trainer
