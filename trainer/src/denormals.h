// Subnormal floats on the CPU: flushed to zero, or computed exactly as IEEE 754 asks.
//
// Why flush: weight decay drives the weights of a network that has stopped learning (its ReLUs
// dead after too large a step) towards zero, through the subnormal range, where an x86 core
// computes each operation 10-100x slower. Such a trial's steps grew from 1 ms to 35 ms on the
// Fashion-MNIST MLP (docs/BENCHMARKS.md), so that a collapsed trial no pruner stopped held its
// CPU slots many times longer than a healthy one. Flushed (FTZ and DAZ), the same values are 0:
// nothing a trained model's accuracy can see.
//
// Thread-safety: the mode belongs to each thread (x86's MXCSR). SetFlushDenormals sets it on the
// calling thread and on every thread of ATen's intra-op pool, and a thread started later inherits
// it from the thread that starts it. Call it while no other thread runs ATen operations.
#pragma once

namespace hyperpack::trainer {

// Flushes subnormal inputs and results to zero (on) or computes with them (off), as above.
// False where the CPU has no such mode (not x86 with SSE3): then nothing changed.
bool SetFlushDenormals(bool on);

}  // namespace hyperpack::trainer
