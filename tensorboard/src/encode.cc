// The Events hyperpack writes. Fields go out in field-number order and proto3 defaults are left
// out, as protobuf's own serializers do, except a oneof member, whose presence is its meaning (a
// bool hyperparameter that is false, a simple_value of 0).
#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "event_fields.h"
#include "hyperpack/tensorboard/events.h"
#include "wire.h"

namespace hyperpack::tensorboard {
namespace {

using wire::WireWriter;

void PutString(WireWriter& out, uint32_t field, std::string_view text) {
  if (!text.empty()) out.Bytes(field, text);
}
void PutDouble(WireWriter& out, uint32_t field, double value) {
  // 0.0 is the default; -0.0 is not (its bits differ), as protobuf decides it.
  if (std::bit_cast<uint64_t>(value) != 0) out.Double(field, value);
}
void PutEnum(WireWriter& out, uint32_t field, int value) {
  if (value != 0) out.Int64(field, value);
}

std::string EncodeEvent(double wall_time, int64_t step, uint32_t field, std::string_view payload) {
  WireWriter event;
  PutDouble(event, fields::event::kWallTime, wall_time);
  if (step != 0) event.Int64(fields::event::kStep, step);
  event.Bytes(field, payload);
  return event.Take();
}

// google.protobuf.Value holding a number, a string or a bool.
std::string EncodeStructValue(const HParamValue& value) {
  namespace s = fields::struct_value;
  WireWriter out;
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) out.Double(s::kNumberValue, v);
        if constexpr (std::is_same_v<T, std::string>) out.Bytes(s::kStringValue, v);
        if constexpr (std::is_same_v<T, bool>) out.Varint(s::kBoolValue, v ? 1 : 0);
      },
      value);
  return out.Take();
}

std::string EncodeHParamInfo(const HParamInfo& info) {
  namespace h = fields::hparam_info;
  WireWriter out;
  PutString(out, h::kName, info.name);
  PutString(out, h::kDisplayName, info.display_name);
  PutString(out, h::kDescription, info.description);
  PutEnum(out, h::kType, static_cast<int>(info.type));
  if (const auto* values = std::get_if<std::vector<HParamValue>>(&info.domain)) {
    WireWriter list;
    for (const HParamValue& value : *values)
      list.Bytes(fields::struct_value::kListValues, EncodeStructValue(value));
    out.Bytes(h::kDomainDiscrete, list.bytes());
  } else if (const auto* interval = std::get_if<Interval>(&info.domain)) {
    WireWriter bounds;
    PutDouble(bounds, fields::interval::kMinValue, interval->min_value);
    PutDouble(bounds, fields::interval::kMaxValue, interval->max_value);
    out.Bytes(h::kDomainInterval, bounds.bytes());
  }
  return out.Take();
}

std::string EncodeMetricInfo(const MetricInfo& info) {
  namespace m = fields::metric_info;
  WireWriter name;
  PutString(name, m::kGroup, info.group);
  PutString(name, m::kTag, info.tag);
  WireWriter out;
  out.Bytes(m::kName, name.bytes());
  PutString(out, m::kDisplayName, info.display_name);
  PutString(out, m::kDescription, info.description);
  PutEnum(out, m::kDatasetType, static_cast<int>(info.dataset_type));
  return out.Take();
}

// The Event that carries one HParamsPluginData: its `data_field` member set to `data`.
std::string EncodeHParamsEvent(std::string_view tag, uint32_t data_field, std::string_view data,
                               double wall_time) {
  WireWriter plugin_data;  // HParamsPluginData; version 0 is the default, left out
  plugin_data.Bytes(data_field, data);
  WireWriter plugin;
  plugin.Bytes(fields::plugin_data::kPluginName, fields::plugin::kHParamsName);
  plugin.Bytes(fields::plugin_data::kContent, plugin_data.bytes());
  WireWriter metadata;
  metadata.Bytes(fields::metadata::kPluginData, plugin.bytes());
  // The plugin's NULL_TENSOR: DT_FLOAT of shape [0] (one Dim whose size 0 is left out).
  WireWriter shape;
  shape.Bytes(fields::shape::kDim, "");
  WireWriter tensor;
  tensor.Varint(fields::tensor::kDtype, static_cast<uint64_t>(fields::DataType::kFloat));
  tensor.Bytes(fields::tensor::kTensorShape, shape.bytes());
  WireWriter value;
  value.Bytes(fields::value::kTag, tag);
  value.Bytes(fields::value::kTensor, tensor.bytes());
  value.Bytes(fields::value::kMetadata, metadata.bytes());
  WireWriter summary;
  summary.Bytes(fields::summary::kValue, value.bytes());
  return EncodeEvent(wall_time, 0, fields::event::kSummary, summary.bytes());
}

}  // namespace

std::string EncodeFileVersionEvent(double wall_time) {
  return EncodeEvent(wall_time, 0, fields::event::kFileVersion, kFileVersion);
}

std::string EncodeScalarsEvent(double wall_time, int64_t step,
                               std::span<const TaggedValue> values) {
  WireWriter summary;
  for (const TaggedValue& tagged : values) {
    WireWriter value;
    value.Bytes(fields::value::kTag, tagged.tag);
    value.Float(fields::value::kSimpleValue, static_cast<float>(tagged.value));
    summary.Bytes(fields::summary::kValue, value.bytes());
  }
  return EncodeEvent(wall_time, step, fields::event::kSummary, summary.bytes());
}

std::string EncodeExperimentEvent(const Experiment& experiment, double wall_time) {
  namespace x = fields::experiment;
  WireWriter out;
  PutString(out, x::kDescription, experiment.description);
  PutString(out, x::kUser, experiment.user);
  PutDouble(out, x::kTimeCreatedSecs, experiment.time_created_secs);
  for (const HParamInfo& info : experiment.hparam_infos)
    out.Bytes(x::kHParamInfos, EncodeHParamInfo(info));
  for (const MetricInfo& info : experiment.metric_infos)
    out.Bytes(x::kMetricInfos, EncodeMetricInfo(info));
  PutString(out, x::kName, experiment.name);
  return EncodeHParamsEvent(fields::plugin::kExperimentTag, fields::plugin::kExperiment,
                            out.bytes(), wall_time);
}

std::string EncodeSessionStartEvent(const SessionStart& start, double wall_time) {
  namespace s = fields::session_start;
  WireWriter out;
  for (const auto& [name, value] : start.hparams) {
    WireWriter entry;  // a map entry: key and value always written, as protobuf writes them
    entry.Bytes(s::kMapKey, name);
    entry.Bytes(s::kMapValue, EncodeStructValue(value));
    out.Bytes(s::kHParams, entry.bytes());
  }
  PutString(out, s::kGroupName, start.group_name);
  PutDouble(out, s::kStartTimeSecs, start.start_time_secs);
  return EncodeHParamsEvent(fields::plugin::kSessionStartTag, fields::plugin::kSessionStartInfo,
                            out.bytes(), wall_time);
}

std::string EncodeSessionEndEvent(const SessionEnd& end, double wall_time) {
  WireWriter out;
  PutEnum(out, fields::session_end::kStatus, static_cast<int>(end.status));
  PutDouble(out, fields::session_end::kEndTimeSecs, end.end_time_secs);
  return EncodeHParamsEvent(fields::plugin::kSessionEndTag, fields::plugin::kSessionEndInfo,
                            out.bytes(), wall_time);
}

}  // namespace hyperpack::tensorboard
