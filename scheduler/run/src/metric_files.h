// Metrics a trial writes to files instead of its output (trial.metrics_from): TensorBoard event
// files under a directory, as Katib's TensorFlowEvent collector reads them and as a Lightning or
// Hugging Face program that only logs to TensorBoard writes them; or lines appended to one file
// (JSON lines, name=value, the study's patterns), as Katib's File collector reads them.
//
// A follower is started when its trial launches: what is there already (an earlier trial's files
// in a shared folder, an earlier attempt's) is not the trial's and is skipped. Poll() returns the
// metric lines added since the last call. Bounded: at most kMaxFiles event files are followed and
// kMaxReadBytes read from each per Poll; corrupt records are skipped with a note, never fatal.
// Internal to hyperpack::run. Thread-safety: I/O, so Poll runs on a pool thread; one call at a
// time per follower (the driver's flag), any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hyperpack/scheduler/metrics.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/tensorboard/events.h"

namespace hyperpack::scheduler {

class MetricFileFollower {
 public:
  static constexpr size_t kMaxFiles = 64;
  static constexpr size_t kMaxReadBytes = size_t{4} << 20;

  // `path`: the folder (tensorboard) or file (file) to follow, absolute. Notes what is there now.
  MetricFileFollower(study::MetricsSource kind, std::string path, MetricPatterns patterns);

  // The metric lines written since the last call, in the order written (for TensorBoard, one
  // line per event with scalars: its step, and its tags as the metrics); `notes` gets a line for
  // each problem met (a corrupt record, a file that cannot be read). `last`: the trial has ended,
  // so a line not ended by a newline is read too.
  std::vector<MetricLine> Poll(std::vector<std::string>* notes, bool last);

 private:
  struct EventFile {
    uint64_t offset = 0;
    tensorboard::RecordReader reader;
    bool dead = false;  // framing lost: not read again
  };
  void PollEvents(std::vector<MetricLine>* out, std::vector<std::string>* notes);
  void PollFile(const std::string& file, EventFile* state, std::vector<MetricLine>* out,
                std::vector<std::string>* notes);
  void PollLines(std::vector<MetricLine>* out, std::vector<std::string>* notes, bool last);

  study::MetricsSource kind_;
  std::string path_;
  MetricPatterns patterns_;
  std::map<std::string, uint64_t> skipped_;  // tensorboard: files there at the start
  std::map<std::string, EventFile> files_;
  uint64_t line_offset_ = 0;  // file: where the next read starts
  std::string partial_;       // file: a line not yet ended
};

}  // namespace hyperpack::scheduler
