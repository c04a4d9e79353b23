#include "metric_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "hyperpack/text.h"

namespace hyperpack::scheduler {
namespace {

namespace fs = std::filesystem;

// The event files under `dir` (TensorBoard names them events.out.tfevents.*), sorted, at most
// `limit`; subfolders included, as a SummaryWriter makes one per run.
std::vector<std::string> EventFiles(const std::string& dir, size_t limit) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator() && out.size() < limit; it.increment(ec)) {
    if (it->is_regular_file(ec) &&
        it->path().filename().string().find("tfevents") != std::string::npos)
      out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t SizeOf(const std::string& file) {
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  return ec ? 0 : size;
}

// Up to `max` bytes of `file` from `offset`.
std::string ReadFrom(const std::string& file, uint64_t offset, size_t max) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "";
  in.seekg(static_cast<std::streamoff>(offset));
  std::string bytes(max, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(max));
  bytes.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return bytes;
}

// A TensorBoard event's scalars as a metric line: the event's step, an `epoch` tag as the epoch.
MetricLine LineOf(const std::vector<tensorboard::Scalar>& scalars) {
  MetricLine line;
  line.step = scalars.front().step;
  for (const tensorboard::Scalar& s : scalars) {
    if (s.tag == "epoch") line.epoch = static_cast<int64_t>(s.value);
    line.values.emplace_back(s.tag, s.value);
  }
  return line;
}

}  // namespace

MetricFileFollower::MetricFileFollower(study::MetricsSource kind, std::string path,
                                       MetricPatterns patterns)
    : kind_(kind), path_(std::move(path)), patterns_(std::move(patterns)) {
  if (kind_ == study::MetricsSource::kTensorboard) {
    for (const std::string& f : EventFiles(path_, kMaxFiles)) skipped_[f] = SizeOf(f);
  } else {
    line_offset_ = SizeOf(path_);  // an earlier trial's lines are not this one's
  }
}

std::vector<MetricLine> MetricFileFollower::Poll(std::vector<std::string>* notes, bool last) {
  std::vector<MetricLine> out;
  if (kind_ == study::MetricsSource::kTensorboard)
    PollEvents(&out, notes);
  else
    PollLines(&out, notes, last);
  return out;
}

void MetricFileFollower::PollEvents(std::vector<MetricLine>* out, std::vector<std::string>* notes) {
  for (const std::string& f : EventFiles(path_, kMaxFiles)) {
    // A file that was there at the start is this trial's only if it has grown since.
    if (auto old = skipped_.find(f); old != skipped_.end()) {
      if (SizeOf(f) <= old->second) continue;
      skipped_.erase(old);
      files_[f].offset = 0;
      files_[f].dead = true;  // an earlier run's file appended to: its framing is not ours
      notes->push_back(StrCat(f, ": written before this trial started; not read"));
      continue;
    }
    EventFile& state = files_[f];
    if (!state.dead) PollFile(f, &state, out, notes);
  }
}

void MetricFileFollower::PollFile(const std::string& file, EventFile* state,
                                  std::vector<MetricLine>* out, std::vector<std::string>* notes) {
  const std::string bytes = ReadFrom(file, state->offset, kMaxReadBytes);
  state->offset += bytes.size();
  state->reader.Feed(bytes);
  for (;;) {
    auto record = state->reader.Next();
    if (!record.ok()) {
      notes->push_back(StrCat(file, ": ", record.status().message()));
      if (state->reader.failed()) {
        state->dead = true;
        return;
      }
      continue;
    }
    if (!*record) return;
    auto scalars = tensorboard::DecodeScalars(**record);
    if (!scalars.ok()) {
      notes->push_back(StrCat(file, ": ", scalars.status().message()));
      continue;
    }
    if (!scalars->empty()) out->push_back(LineOf(*scalars));
  }
}

void MetricFileFollower::PollLines(std::vector<MetricLine>* out, std::vector<std::string>* notes,
                                   bool last) {
  const uint64_t size = SizeOf(path_);
  if (size < line_offset_) {  // rewritten from the start
    line_offset_ = 0;
    partial_.clear();
  }
  const std::string bytes = ReadFrom(path_, line_offset_, kMaxReadBytes);
  line_offset_ += bytes.size();
  partial_ += bytes;
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    auto line = ParseMetricLine(std::string_view(partial_).substr(start, nl - start), patterns_);
    if (line) out->push_back(std::move(*line));
  }
  partial_.erase(0, start);
  if (last && !partial_.empty()) {  // the trial has ended: its last line will not be finished
    if (auto line = ParseMetricLine(partial_, patterns_)) out->push_back(std::move(*line));
    partial_.clear();
  }
  // A line longer than a read is not a metric line: dropped, as an output line of that length is.
  if (partial_.size() > kMaxReadBytes) {
    notes->push_back(StrCat(path_, ": a line over ", kMaxReadBytes, " bytes skipped"));
    partial_.clear();
  }
}

}  // namespace hyperpack::scheduler
