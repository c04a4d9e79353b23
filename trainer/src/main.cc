// hyperpack-trainer: see include/hyperpack/trainer/trainer.h.
#include "hyperpack/trainer/trainer.h"

int main(int argc, char** argv) { return hyperpack::trainer::TrainerMain(argc, argv); }
