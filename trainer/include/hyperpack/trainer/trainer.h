// hyperpack-trainer: data-parallel libtorch training that speaks hyperpack's trial protocol.
//
// It reads its configuration from flags and from the trial's parameter file
// (HYPERPACK_PARAMS_FILE), meets its peers by torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or starts its own local ranks (--nproc N, or
// data_parallel N without WORLD_SIZE), trains, and prints one JSON line of metrics per epoch from
// rank 0. Exit codes: 0 done, 3 this configuration cannot run (out of memory, a batch that does
// not fit the data), 1 anything else.
// Thread-safety: TrainerMain is a process's main; call it once.
#pragma once

namespace hyperpack::trainer {

int TrainerMain(int argc, char** argv);

}  // namespace hyperpack::trainer
