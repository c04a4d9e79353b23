#include "hyperpack/scheduler/run_phase.h"

namespace hyperpack::scheduler {

using storage::StopReason;

const char* RunPhaseName(RunPhase phase) {
  switch (phase) {
    case RunPhase::kRestoring:
      return "restoring";
    case RunPhase::kLaunching:
      return "launching";
    case RunPhase::kWaitingForNodes:
      return "waiting for nodes";
    case RunPhase::kHeld:
      return "held";
    case RunPhase::kStopping:
      return "stopping";
    case RunPhase::kDone:
      return "done";
  }
  return "?";
}

namespace {
// Moves `phase` from `from` to `to`; false (unchanged) where it is elsewhere.
bool Move(RunPhase* phase, RunPhase from, RunPhase to) {
  if (*phase != from) return false;
  *phase = to;
  return true;
}
}  // namespace

bool RunLifecycle::Start() { return Move(&phase_, RunPhase::kRestoring, RunPhase::kLaunching); }
bool RunLifecycle::NoNodes() {
  return Move(&phase_, RunPhase::kLaunching, RunPhase::kWaitingForNodes);
}
bool RunLifecycle::NodesBack() {
  return Move(&phase_, RunPhase::kWaitingForNodes, RunPhase::kLaunching);
}
bool RunLifecycle::Release() { return Move(&phase_, RunPhase::kHeld, RunPhase::kLaunching); }

bool RunLifecycle::Hold() {
  if (!placing()) return false;
  phase_ = RunPhase::kHeld;
  return true;
}

bool RunLifecycle::Stop(StopReason reason) {
  if (stopped() || reason == StopReason::kNone) return false;
  phase_ = RunPhase::kStopping;
  reason_ = reason;
  return true;
}

bool RunLifecycle::Cancel() {
  if (done() || reason_ == StopReason::kCancelled) return false;
  phase_ = RunPhase::kStopping;
  reason_ = StopReason::kCancelled;
  return true;
}

bool RunLifecycle::Finish() { return Move(&phase_, RunPhase::kStopping, RunPhase::kDone); }

}  // namespace hyperpack::scheduler
