// A run's lifecycle as one typed state, moved only by named transitions. The study controller
// holds one in place of flags: it asks which phase the run is in and which transition applies, and
// acts on the answer (says what happened, cancels what waits); this class decides nothing else.
//
//               Start                Hold
//   kRestoring ------> kLaunching <=======> kHeld
//                        |    ^     Release   |
//               NoNodes  v    |  NodesBack    |
//                   kWaitingForNodes ---------+  (Hold, from here too)
//
//   Stop(reason): kRestoring, kLaunching, kWaitingForNodes or kHeld -> kStopping -- Finish -->
//   kDone Cancel: as Stop(kCancelled), and from kStopping for another reason too (the reason
//   becomes kCancelled: what is left running is stopped as well).
//
// Pure. Thread-safety: none; its owner's thread.
#pragma once

#include "hyperpack/storage/records.h"

namespace hyperpack::scheduler {

enum class RunPhase {
  kRestoring,        // made; Restore replays the stored study (its journal is not written again)
  kLaunching,        // trials are proposed and placed as room and the budget allow
  kWaitingForNodes,  // as kLaunching, but no node is up: said once, until one joins
  kHeld,             // paused (`hyperpack pause`): nothing is placed until Release
  kStopping,         // no trial starts any more (stop_reason() says why); running ones end
  kDone,             // finished: the summary is out and events are ignored
};

// "launching", "held", ...: for messages and tests.
const char* RunPhaseName(RunPhase phase);

class RunLifecycle {
 public:
  RunPhase phase() const { return phase_; }
  // Why it stopped launching; StopReason::kNone before Stop or Cancel.
  storage::StopReason stop_reason() const { return reason_; }

  bool restoring() const { return phase_ == RunPhase::kRestoring; }
  // New trials may be proposed and placed.
  bool placing() const {
    return phase_ == RunPhase::kLaunching || phase_ == RunPhase::kWaitingForNodes;
  }
  bool held() const { return phase_ == RunPhase::kHeld; }
  // No trial starts any more: kStopping or kDone.
  bool stopped() const { return phase_ == RunPhase::kStopping || phase_ == RunPhase::kDone; }
  bool done() const { return phase_ == RunPhase::kDone; }

  // The transitions. Each returns whether it applied; where it does not, nothing changes.
  bool Start();      // kRestoring -> kLaunching
  bool NoNodes();    // kLaunching -> kWaitingForNodes
  bool NodesBack();  // kWaitingForNodes -> kLaunching
  bool Hold();       // kLaunching or kWaitingForNodes -> kHeld
  bool Release();    // kHeld -> kLaunching
  // kRestoring, kLaunching, kWaitingForNodes or kHeld -> kStopping with `reason` (not kNone).
  bool Stop(storage::StopReason reason);
  // Stop(kCancelled), or kStopping for another reason -> kStopping for kCancelled.
  bool Cancel();
  bool Finish();  // kStopping -> kDone

 private:
  RunPhase phase_ = RunPhase::kRestoring;
  storage::StopReason reason_ = storage::StopReason::kNone;
};

}  // namespace hyperpack::scheduler
