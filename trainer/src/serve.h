// hyperpack-trainer --serve: trials one after another in one warm process (hyperpack/warm.h), so
// that libtorch and the data are loaded once rather than once per trial.
// Thread-safety: Serve is a process's main. stop_signal is written by a signal handler and read
// by the training loop.
#pragma once

#include <atomic>

namespace hyperpack::trainer {

// The signal (SIGTERM or SIGINT) that asked the running trial to stop, or 0. In a warm process the
// trial then stops at its next step, as its own process would have died of the signal.
inline std::atomic<int> stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "written from a signal handler");
// The read end of a pipe that the handler also writes a byte to, or -1: any thread may take the
// signal, so a wait elsewhere polls this to wake up to it.
inline std::atomic<int> stop_wake_fd{-1};

// One trial, as hyperpack-trainer's main runs it: its exit code. Defined in trainer.cc.
int RunTrial(int argc, char** argv);

// Serves run requests from the socket at env::kControlFdNumber until it closes. Returns the
// process's exit code: 0, or 1 when there is no such socket.
int Serve();

}  // namespace hyperpack::trainer
