// The field numbers and enum values of the messages this library reads and writes, as the real
// .proto files define them: tensorflow/tensorboard at 70b76c92 (tensorboard/compat/proto/
// {event,summary,tensor,tensor_shape,types}.proto, TensorFlow's own files with the package renamed
// by its update.sh, and tensorboard/plugins/hparams/{plugin_data,api}.proto), checked against
// tensorflow/tensorflow's core/util/event.proto (c40b1b90), core/framework/summary.proto
// (c3bd2f4b) and tensor.proto (3dc7f225); google/protobuf/struct.proto as protoc 3.21 ships it.
// tests/tensorboard_test.cc pins the encoders to the bytes TensorBoard's own Python writer makes,
// and bench/tfevents_check.sh decodes written files against those .proto files with protoc.
#pragma once

#include <cstdint>
#include <string_view>

namespace hyperpack::tensorboard::fields {

// tensorflow.Event (core/util/event.proto).
namespace event {
inline constexpr uint32_t kWallTime = 1;     // double
inline constexpr uint32_t kStep = 2;         // int64
inline constexpr uint32_t kFileVersion = 3;  // string, oneof what
inline constexpr uint32_t kSummary = 5;      // Summary, oneof what
}  // namespace event

// tensorflow.Summary and Summary.Value (core/framework/summary.proto).
namespace summary {
inline constexpr uint32_t kValue = 1;  // repeated Value
}  // namespace summary
namespace value {
inline constexpr uint32_t kTag = 1;          // string
inline constexpr uint32_t kSimpleValue = 2;  // float, oneof value
inline constexpr uint32_t kTensor = 8;       // TensorProto, oneof value
inline constexpr uint32_t kMetadata = 9;     // SummaryMetadata
// The other members of the oneof (3 obsolete histogram, 4 image, 5 histo, 6 audio): each clears
// what an earlier member set.
inline constexpr bool IsOtherValueMember(uint32_t field) { return field >= 3 && field <= 6; }
}  // namespace value

// tensorflow.SummaryMetadata and its PluginData.
namespace metadata {
inline constexpr uint32_t kPluginData = 1;  // PluginData
}  // namespace metadata
namespace plugin_data {
inline constexpr uint32_t kPluginName = 1;  // string
inline constexpr uint32_t kContent = 2;     // bytes
}  // namespace plugin_data

// tensorflow.TensorProto (core/framework/tensor.proto), TensorShapeProto (tensor_shape.proto).
namespace tensor {
inline constexpr uint32_t kDtype = 1;          // DataType
inline constexpr uint32_t kTensorShape = 2;    // TensorShapeProto
inline constexpr uint32_t kTensorContent = 4;  // bytes
inline constexpr uint32_t kFloatVal = 5;       // repeated float, packed
inline constexpr uint32_t kDoubleVal = 6;      // repeated double, packed
inline constexpr uint32_t kIntVal = 7;         // repeated int32, packed
inline constexpr uint32_t kInt64Val = 10;      // repeated int64, packed
inline constexpr uint32_t kHalfVal = 13;       // repeated int32 (the fp16 bits), packed
}  // namespace tensor
namespace shape {
inline constexpr uint32_t kDim = 2;          // repeated Dim
inline constexpr uint32_t kUnknownRank = 3;  // bool
inline constexpr uint32_t kDimSize = 1;      // Dim.size, int64
}  // namespace shape

// tensorflow.DataType (core/framework/types.proto).
enum class DataType : int32_t {
  kInvalid = 0,
  kFloat = 1,
  kDouble = 2,
  kInt32 = 3,
  kInt64 = 9,
  kHalf = 19,
};

// tensorboard.hparams.HParamsPluginData (plugins/hparams/plugin_data.proto).
namespace plugin {
inline constexpr std::string_view kScalarsName = "scalars";
inline constexpr std::string_view kHParamsName = "hparams";
inline constexpr std::string_view kExperimentTag = "_hparams_/experiment";
inline constexpr std::string_view kSessionStartTag = "_hparams_/session_start_info";
inline constexpr std::string_view kSessionEndTag = "_hparams_/session_end_info";
inline constexpr uint32_t kVersion = 1;           // int32; hyperpack writes 0, left out
inline constexpr uint32_t kExperiment = 2;        // Experiment, oneof data
inline constexpr uint32_t kSessionStartInfo = 3;  // SessionStartInfo, oneof data
inline constexpr uint32_t kSessionEndInfo = 4;    // SessionEndInfo, oneof data
}  // namespace plugin

// tensorboard.hparams.SessionStartInfo and SessionEndInfo (plugin_data.proto).
namespace session_start {
inline constexpr uint32_t kHParams = 1;        // map<string, google.protobuf.Value>
inline constexpr uint32_t kGroupName = 4;      // string
inline constexpr uint32_t kStartTimeSecs = 5;  // double
inline constexpr uint32_t kMapKey = 1;         // a map entry's key
inline constexpr uint32_t kMapValue = 2;       // a map entry's value
}  // namespace session_start
namespace session_end {
inline constexpr uint32_t kStatus = 1;       // Status
inline constexpr uint32_t kEndTimeSecs = 2;  // double
}  // namespace session_end

// tensorboard.hparams.Experiment, HParamInfo, Interval, MetricInfo, MetricName (api.proto).
namespace experiment {
inline constexpr uint32_t kDescription = 1;      // string
inline constexpr uint32_t kUser = 2;             // string
inline constexpr uint32_t kTimeCreatedSecs = 3;  // double
inline constexpr uint32_t kHParamInfos = 4;      // repeated HParamInfo
inline constexpr uint32_t kMetricInfos = 5;      // repeated MetricInfo
inline constexpr uint32_t kName = 6;             // string
}  // namespace experiment
namespace hparam_info {
inline constexpr uint32_t kName = 1;            // string
inline constexpr uint32_t kDisplayName = 2;     // string
inline constexpr uint32_t kDescription = 3;     // string
inline constexpr uint32_t kType = 4;            // DataType
inline constexpr uint32_t kDomainDiscrete = 5;  // google.protobuf.ListValue, oneof domain
inline constexpr uint32_t kDomainInterval = 6;  // Interval, oneof domain
}  // namespace hparam_info
namespace interval {
inline constexpr uint32_t kMinValue = 1;  // double
inline constexpr uint32_t kMaxValue = 2;  // double
}  // namespace interval
namespace metric_info {
inline constexpr uint32_t kName = 1;         // MetricName
inline constexpr uint32_t kDisplayName = 3;  // string
inline constexpr uint32_t kDescription = 4;  // string
inline constexpr uint32_t kDatasetType = 5;  // DatasetType
inline constexpr uint32_t kGroup = 1;        // MetricName.group
inline constexpr uint32_t kTag = 2;          // MetricName.tag
}  // namespace metric_info

// google.protobuf.Value and ListValue (google/protobuf/struct.proto).
namespace struct_value {
inline constexpr uint32_t kNumberValue = 2;  // double, oneof kind
inline constexpr uint32_t kStringValue = 3;  // string, oneof kind
inline constexpr uint32_t kBoolValue = 4;    // bool, oneof kind
inline constexpr uint32_t kListValues = 1;   // ListValue.values, repeated Value
}  // namespace struct_value

}  // namespace hyperpack::tensorboard::fields
