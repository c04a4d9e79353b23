// Local ranks, as `torchrun --standalone` starts them: N copies of this program with RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT. If one
// rank fails the others are stopped (SIGTERM, then SIGKILL after 5 s).
// Thread-safety: call from the main thread of a process that has started no other children.
#pragma once

namespace hyperpack::trainer {

// Runs the ranks to completion. Exit code: 3 if a rank exited 3, else 1 if any failed, else 0.
int LaunchLocalRanks(int nproc, int argc, char** argv);

}  // namespace hyperpack::trainer
