// The lifecycle verbs on a stored study: `hyperpack stop`, `cancel`, `pause`, `resume`, `update`,
// `enqueue`, `retry`, `add-results` and `delete`, run here for the CLI on this machine and for
// `hyperpack serve` on behalf of a client.
//
// A verb for a running study becomes a control in storage (storage::ControlRecord); the study's
// runner reads it within a quarter of a second, carries it out (StudyController) and records what
// came of it, which ApplyControl waits for and returns. Without a runner: stop, cancel, pause and
// resume are refused (there is nothing to stop); update, enqueue and retry are kept for the study's
// next run (`hyperpack run` carries them out before placing anything; `hyperpack ask` hands
// enqueued configurations out first); add-results are stored at once; delete removes the study. A
// runner that does not answer in time has its control withdrawn, so a late answer never surprises.
//
// Thread-safety: each call uses the Storage it is given on the calling thread; it may block for
// up to ControlRequest::answer_within_s waiting for a runner (the server calls it on its pool).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"

namespace hyperpack::scheduler {

enum class Verb {
  kStop,
  kCancel,
  kPause,
  kResume,
  kUpdate,
  kEnqueue,
  kRetry,
  kAddResults,
  kDelete
};
// "stop", "cancel", "pause", "resume", "update", "enqueue", "retry", "add-results", "delete".
const char* VerbName(Verb verb);
std::optional<Verb> ParseVerb(const std::string& name);

// The verb and what it changes or brings (storage::ControlArgs: kUpdate's settings; kEnqueue's
// configurations to run next, conformed to the space here, an error naming the first that does not
// fit; kAddResults' evaluated configurations with their values), and how it was given.
struct ControlRequest : storage::ControlArgs {
  Verb verb = Verb::kStop;
  std::string study;
  // kEnqueue: more configurations, as JSON text: an object of parameters, or a list of them.
  std::string params_json;
  // kAddResults: more results, as a results file's text (study/results.h) and its name.
  std::string results_text, results_path;
  // kRetry: every failed (failed or timed out) trial, and/or these trial numbers.
  bool retry_failed = false;
  std::vector<int> retry_trials;
  double answer_within_s = 15;  // how long a runner has to answer
};

struct ControlAnswer {
  std::string study;
  Verb verb = Verb::kStop;
  bool refused = false;  // nothing was done: `outcome` says why
  bool kept = false;     // no runner: kept for the study's next run
  bool live = false;     // a runner carried it out
  std::string outcome;   // for people: the study's new state, or why not
};

// Errors, as opposed to refusals: kNotFound (no such study, or a retried trial), kInvalidArgument
// (a configuration outside the space, an update of nothing), kIo.
Result<ControlAnswer> ApplyControl(storage::Storage& db, const ControlRequest& request);

}  // namespace hyperpack::scheduler
