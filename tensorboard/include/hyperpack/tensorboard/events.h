// TensorBoard event files as bytes: the TFRecord framing, the scalars an Event carries, and the
// Events hyperpack writes (the file version, scalars, and the HParams plugin's experiment and
// sessions, which make `tensorboard --logdir DIR` show an HParams table).
//
// Pure codec: no files, no clock, no protobuf library. Callers read and write the files and pass
// the times in. Every decoder takes bytes nobody here wrote (a trial's own SummaryWriter, a file
// still being written) and answers malformed input with an error value: it never crashes, and
// never allocates more than the input it was given (a record is at most kMaxRecordBytes).
//
// The wire format is the one tensorflow/core/util/event.proto, tensorflow/core/framework/
// {summary,tensor,tensor_shape}.proto and tensorboard/plugins/hparams/{plugin_data,api}.proto
// define; the field numbers are in src/event_fields.h.
//
// Thread-safety: the functions are pure; a RecordReader is a plain value, one owner at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hyperpack/status.h"

namespace hyperpack::tensorboard {

// ---- TFRecord framing ---------------------------------------------------------------------------
// A record: uint64 length (little endian) | uint32 masked CRC of those 8 bytes | data[length] |
// uint32 masked CRC of data.

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `bytes`: Crc32c("123456789") is
// 0xE3069283.
uint32_t Crc32c(std::string_view bytes);
// TFRecord's masking of a CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8, in uint32 arithmetic.
uint32_t MaskCrc(uint32_t crc);
inline uint32_t MaskedCrc32c(std::string_view bytes) { return MaskCrc(Crc32c(bytes)); }

// The longest record data the reader accepts; a longer length is refused before any allocation.
inline constexpr uint64_t kMaxRecordBytes = uint64_t{16} << 20;
// Bytes of framing around each record's data.
inline constexpr size_t kRecordOverheadBytes = 16;

// `data` as one framed record. `data` must be at most kMaxRecordBytes for a reader to accept it.
std::string FrameRecord(std::string_view data);

// Splits a stream of framed records fed in pieces of any size (a file being followed may end
// mid-record) into the records' data.
//
// Next() answers: a record's data; std::nullopt when the bytes fed so far end inside a record
// (they are kept for the next Feed); or an error (kInvalidArgument) for a corrupt record.
// - A record whose data fails its CRC is reported once and stepped over: its length had a good
//   CRC, so the records after it are still found.
// - A length that fails its CRC, or exceeds kMaxRecordBytes, loses the framing: that error is
//   returned by every later Next(), and later Feeds are dropped (failed() is true).
// Memory: the unread part of what was fed, of which at most one partial record is kept between
// feeds; a record's buffer is never sized from an unchecked length.
class RecordReader {
 public:
  void Feed(std::string_view bytes);
  Result<std::optional<std::string>> Next();

  // Whether the framing was lost (see above).
  bool failed() const { return !failure_.ok(); }
  // Bytes fed and not yet returned or stepped over: a partial record at the end of a file.
  size_t buffered_bytes() const { return buffer_.size() - position_; }
  // Offset in the stream of the next record's first byte.
  uint64_t offset() const { return offset_; }

 private:
  std::string buffer_;
  size_t position_ = 0;  // start of the next record in buffer_
  uint64_t offset_ = 0;
  Status failure_;
};

// ---- Scalars in an Event ------------------------------------------------------------------------

struct Scalar {
  std::string tag;
  int64_t step = 0;
  double wall_time = 0;  // seconds since the epoch, as the writer stamped it
  double value = 0;

  bool operator==(const Scalar&) const = default;
};

// The scalars one record's data (a serialized tensorflow.Event) carries, in the order written:
// - a Summary.Value's simple_value (PyTorch's SummaryWriter, TF1's tf.summary.scalar);
// - a Summary.Value's tensor holding one element (shape [] or all dims 1) of DT_FLOAT, DT_DOUBLE,
//   DT_HALF, DT_INT32 or DT_INT64, from tensor_content or the *_val fields, packed or not (TF2's
//   tf.summary.scalar, Keras, Lightning and Hugging Face through it), unless the value's metadata
//   names a plugin other than "scalars". A tensor with no values is zero, as in TensorFlow. A
//   value written without metadata is taken as a scalar: TF1's FileWriter keeps a tag's metadata
//   on its first value only, so a numeric one-element tensor of another plugin whose metadata
//   came earlier is returned too.
// Everything else is skipped: file versions, graphs, images, histograms, audio, other tensors,
// unknown fields. An empty list for an Event without scalars. kInvalidArgument for bytes that are
// not a well-formed Event (a varint past the end or longer than 10 bytes, a length past the end,
// a wire type 6 or 7, a field number 0, a scalar tensor_content of the wrong size), naming the
// field.
Result<std::vector<Scalar>> DecodeScalars(std::string_view event);

// ---- Events hyperpack writes --------------------------------------------------------------------
// Each returns a serialized Event; FrameRecord makes it a record. wall_time is seconds since the
// epoch.

// "brain.Event:2": the version every event file's first record states.
inline constexpr std::string_view kFileVersion = "brain.Event:2";
std::string EncodeFileVersionEvent(double wall_time);

struct TaggedValue {
  std::string tag;
  double value = 0;  // written as a float32 simple_value, as PyTorch's SummaryWriter does
};
// An Event at `step` with a Summary of simple_value scalars.
std::string EncodeScalarsEvent(double wall_time, int64_t step, std::span<const TaggedValue> values);

// ---- HParams plugin ----------------------------------------------------------------------------
// Each is an Event at step 0 with one Summary.Value: tag "_hparams_/experiment",
// "_hparams_/session_start_info" or "_hparams_/session_end_info", metadata.plugin_data
// {plugin_name "hparams", content: a serialized HParamsPluginData of version 0}, and an empty
// DT_FLOAT tensor of shape [0], as the plugin's own summary writer makes them. One experiment per
// log directory (its root run); one session start and end per trial, in the trial's own run.

// A hyperparameter's value (google.protobuf.Value's number, string or bool).
using HParamValue = std::variant<double, std::string, bool>;

// api.proto's DataType.
enum class HParamType { kUnset = 0, kString = 1, kBool = 2, kFloat64 = 3 };
// api.proto's Interval.
struct Interval {
  double min_value = 0;
  double max_value = 0;
};
// api.proto's DatasetType.
enum class DatasetType { kUnknown = 0, kTraining = 1, kValidation = 2 };
// api.proto's Status.
enum class SessionStatus { kUnknown = 0, kSuccess = 1, kFailure = 2, kRunning = 3 };

struct HParamInfo {
  std::string name;
  std::string display_name;
  std::string description;
  HParamType type = HParamType::kUnset;
  // No domain, the discrete values, or an interval.
  std::variant<std::monostate, std::vector<HParamValue>, Interval> domain;
};

struct MetricInfo {
  std::string group;  // MetricName.group: the run, relative to the session's, "" for its own
  std::string tag;    // MetricName.tag: the scalar's tag
  std::string display_name;
  std::string description;
  DatasetType dataset_type = DatasetType::kUnknown;
};

struct Experiment {
  std::string name;
  std::string description;
  std::string user;
  double time_created_secs = 0;
  std::vector<HParamInfo> hparam_infos;
  std::vector<MetricInfo> metric_infos;
};

struct SessionStart {
  std::map<std::string, HParamValue> hparams;
  std::string group_name;  // sessions of one group are one row of the table (e.g. the trial id)
  double start_time_secs = 0;
};

struct SessionEnd {
  SessionStatus status = SessionStatus::kUnknown;
  double end_time_secs = 0;
};

std::string EncodeExperimentEvent(const Experiment& experiment, double wall_time);
std::string EncodeSessionStartEvent(const SessionStart& start, double wall_time);
std::string EncodeSessionEndEvent(const SessionEnd& end, double wall_time);

}  // namespace hyperpack::tensorboard
