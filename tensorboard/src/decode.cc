// DecodeScalars: an Event's scalars, read field by field with protobuf's semantics (a later
// singular field replaces an earlier one, a repeated embedded message merges, a oneof keeps its
// last member, unknown fields are skipped).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "event_fields.h"
#include "hyperpack/tensorboard/events.h"
#include "wire.h"

namespace hyperpack::tensorboard {
namespace {

using fields::DataType;
using wire::Field;
using wire::WireReader;
using wire::WireType;

// The values of one *_val field: how many, and the first (the one a scalar has).
struct ValList {
  uint64_t count = 0;
  uint64_t first = 0;  // the raw payload: the bits of a float or double, or the varint
};

// What a TensorProto says about being a numeric scalar, without keeping its values.
struct TensorScan {
  int32_t dtype = 0;
  bool unknown_rank = false;
  bool negative_dim = false;
  uint64_t elements = 1;  // product of the dims, saturated at 2
  std::string_view content;
  ValList floats, doubles, ints, int64s, halves;
};

struct ValueScan {
  std::string_view tag;
  enum class Kind { kNone, kSimple, kTensor, kOther } kind = Kind::kNone;
  float simple_value = 0;
  TensorScan tensor;
  std::string_view plugin_name;
};

// A packed list of fixed-size values, or one unpacked value.
Status ScanFixed(const Field& field, WireType unpacked, size_t size, ValList& list) {
  if (field.type == unpacked) {
    if (list.count++ == 0) list.first = field.number;
    return Status::Ok();
  }
  if (field.type != WireType::kLengthDelimited) return Status::Ok();  // unknown: skipped
  if (field.bytes.size() % size != 0)
    return Status::Invalid("packed field ", field.field_number, " of ", field.bytes.size(),
                           " bytes is not a whole number of ", size, "-byte values");
  if (list.count == 0 && !field.bytes.empty()) {
    uint64_t first = 0;
    for (size_t i = 0; i < size; ++i)
      first |= static_cast<uint64_t>(static_cast<uint8_t>(field.bytes[i])) << (8 * i);
    list.first = first;
  }
  list.count += field.bytes.size() / size;
  return Status::Ok();
}

// A packed list of varints, or one unpacked varint.
Status ScanVarints(const Field& field, ValList& list) {
  if (field.type == WireType::kVarint) {
    if (list.count++ == 0) list.first = field.number;
    return Status::Ok();
  }
  if (field.type != WireType::kLengthDelimited) return Status::Ok();
  std::string_view rest = field.bytes;
  while (!rest.empty()) {
    Result<uint64_t> value = wire::ReadVarint(rest);
    if (!value.ok()) return value.status().WithContext(StrCat("packed field ", field.field_number));
    if (list.count++ == 0) list.first = *value;
  }
  return Status::Ok();
}

Status ScanDim(std::string_view dim, TensorScan& tensor) {
  int64_t size = 0;
  WireReader reader(dim);
  while (true) {
    HP_ASSIGN_OR_RETURN(const std::optional<Field> field, reader.Next());
    if (!field) break;
    if (field->field_number == fields::shape::kDimSize && field->type == WireType::kVarint)
      size = static_cast<int64_t>(field->number);
  }
  if (size < 0) tensor.negative_dim = true;
  if (size >= 0) tensor.elements = std::min<uint64_t>(tensor.elements * size, 2);
  return Status::Ok();
}

Status ScanShape(std::string_view shape, TensorScan& tensor) {
  WireReader reader(shape);
  while (true) {
    HP_ASSIGN_OR_RETURN(const std::optional<Field> field, reader.Next());
    if (!field) return Status::Ok();
    if (field->field_number == fields::shape::kDim && field->type == WireType::kLengthDelimited)
      HP_RETURN_IF_ERROR(ScanDim(field->bytes, tensor).WithContext("dim"));
    if (field->field_number == fields::shape::kUnknownRank && field->type == WireType::kVarint)
      tensor.unknown_rank = field->number != 0;
  }
}

Status ScanTensorField(const Field& field, TensorScan& tensor) {
  namespace t = fields::tensor;
  const bool is_bytes = field.type == WireType::kLengthDelimited;
  switch (field.field_number) {
    case t::kDtype:
      if (field.type == WireType::kVarint) tensor.dtype = static_cast<int32_t>(field.number);
      return Status::Ok();
    case t::kTensorShape:
      return is_bytes ? ScanShape(field.bytes, tensor).WithContext("tensor_shape") : Status::Ok();
    case t::kTensorContent:
      if (is_bytes) tensor.content = field.bytes;
      return Status::Ok();
    case t::kFloatVal:
      return ScanFixed(field, WireType::kFixed32, 4, tensor.floats);
    case t::kDoubleVal:
      return ScanFixed(field, WireType::kFixed64, 8, tensor.doubles);
    case t::kIntVal:
      return ScanVarints(field, tensor.ints);
    case t::kInt64Val:
      return ScanVarints(field, tensor.int64s);
    case t::kHalfVal:
      return ScanVarints(field, tensor.halves);
    default:
      return Status::Ok();
  }
}

Status ScanTensor(std::string_view bytes, TensorScan& tensor) {
  WireReader reader(bytes);
  while (true) {
    HP_ASSIGN_OR_RETURN(const std::optional<Field> field, reader.Next());
    if (!field) return Status::Ok();
    HP_RETURN_IF_ERROR(ScanTensorField(*field, tensor));
  }
}

// IEEE half precision bits as a double (subnormals, infinities and NaN included).
double HalfToDouble(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 0x1f) return mantissa == 0 ? sign * INFINITY : NAN;
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

// A scalar dtype's element size in tensor_content, its *_val list, and how to read its bits.
struct DtypeLayout {
  size_t size = 0;  // 0: not a dtype read as a scalar
  ValList TensorScan::*list = nullptr;
};

DtypeLayout LayoutOf(int32_t dtype) {
  switch (static_cast<DataType>(dtype)) {
    case DataType::kFloat:
      return {4, &TensorScan::floats};
    case DataType::kDouble:
      return {8, &TensorScan::doubles};
    case DataType::kInt32:
      return {4, &TensorScan::ints};
    case DataType::kInt64:
      return {8, &TensorScan::int64s};
    case DataType::kHalf:
      return {2, &TensorScan::halves};
    default:
      return {};
  }
}

double BitsToDouble(DataType dtype, uint64_t bits) {
  switch (dtype) {
    case DataType::kFloat:
      return wire::FloatFromBits(bits);
    case DataType::kDouble:
      return wire::DoubleFromBits(bits);
    case DataType::kInt32:
      return static_cast<int32_t>(static_cast<uint32_t>(bits));
    case DataType::kInt64:
      return static_cast<double>(static_cast<int64_t>(bits));
    case DataType::kHalf:
      return HalfToDouble(static_cast<uint16_t>(bits));
    default:
      return 0;
  }
}

// The tensor's one value; std::nullopt for a tensor that is not a numeric scalar.
Result<std::optional<double>> TensorScalar(const TensorScan& tensor) {
  const DtypeLayout layout = LayoutOf(tensor.dtype);
  if (layout.size == 0 || tensor.unknown_rank || tensor.negative_dim || tensor.elements != 1)
    return std::optional<double>();
  const auto dtype = static_cast<DataType>(tensor.dtype);
  if (!tensor.content.empty()) {
    if (tensor.content.size() != layout.size)
      return Status::Invalid("tensor_content of ", tensor.content.size(), " bytes for a scalar of ",
                             layout.size, "-byte elements");
    uint64_t bits = 0;
    for (size_t i = 0; i < layout.size; ++i)
      bits |= static_cast<uint64_t>(static_cast<uint8_t>(tensor.content[i])) << (8 * i);
    return std::optional<double>(BitsToDouble(dtype, bits));
  }
  // No values at all is a zero, as TensorFlow's Tensor::FromProto fills it.
  const ValList& list = tensor.*layout.list;
  return std::optional<double>(list.count == 0 ? 0.0 : BitsToDouble(dtype, list.first));
}

Status ScanMetadata(std::string_view bytes, ValueScan& value) {
  WireReader reader(bytes);
  while (true) {
    HP_ASSIGN_OR_RETURN(const std::optional<Field> field, reader.Next());
    if (!field) return Status::Ok();
    if (field->field_number != fields::metadata::kPluginData ||
        field->type != WireType::kLengthDelimited)
      continue;
    WireReader plugin(field->bytes);
    while (true) {
      HP_ASSIGN_OR_RETURN(const std::optional<Field> inner, plugin.Next());
      if (!inner) break;
      if (inner->field_number == fields::plugin_data::kPluginName &&
          inner->type == WireType::kLengthDelimited)
        value.plugin_name = inner->bytes;
    }
  }
}

Status ScanValueField(const Field& field, ValueScan& value) {
  namespace v = fields::value;
  const bool is_bytes = field.type == WireType::kLengthDelimited;
  if (field.field_number == v::kTag && is_bytes) {
    value.tag = field.bytes;
  } else if (field.field_number == v::kSimpleValue && field.type == WireType::kFixed32) {
    value.kind = ValueScan::Kind::kSimple;
    value.simple_value = wire::FloatFromBits(field.number);
  } else if (field.field_number == v::kTensor && is_bytes) {
    if (value.kind != ValueScan::Kind::kTensor) value.tensor = TensorScan();
    value.kind = ValueScan::Kind::kTensor;
    return ScanTensor(field.bytes, value.tensor).WithContext("tensor");
  } else if (field.field_number == v::kMetadata && is_bytes) {
    return ScanMetadata(field.bytes, value).WithContext("metadata");
  } else if (v::IsOtherValueMember(field.field_number)) {
    value.kind = ValueScan::Kind::kOther;
  }
  return Status::Ok();
}

// The scalar a Summary.Value carries, if it carries one: appended to `out` with only its tag and
// value set (the Event's step and time may come after its summary).
Status ScanValue(std::string_view bytes, std::vector<Scalar>& out) {
  ValueScan value;
  WireReader reader(bytes);
  while (true) {
    HP_ASSIGN_OR_RETURN(const std::optional<Field> field, reader.Next());
    if (!field) break;
    HP_RETURN_IF_ERROR(ScanValueField(*field, value));
  }
  if (value.kind == ValueScan::Kind::kSimple) {
    out.push_back(Scalar{std::string(value.tag), 0, 0, value.simple_value});
    return Status::Ok();
  }
  if (value.kind != ValueScan::Kind::kTensor) return Status::Ok();
  if (!value.plugin_name.empty() && value.plugin_name != fields::plugin::kScalarsName)
    return Status::Ok();
  Result<std::optional<double>> scalar = TensorScalar(value.tensor);
  if (!scalar.ok()) return scalar.status().WithContext("tensor");
  if (*scalar) out.push_back(Scalar{std::string(value.tag), 0, 0, **scalar});
  return Status::Ok();
}

Status ScanSummary(std::string_view bytes, std::vector<Scalar>& out) {
  WireReader reader(bytes);
  for (int index = 0;;) {
    HP_ASSIGN_OR_RETURN(const std::optional<Field> field, reader.Next());
    if (!field) return Status::Ok();
    if (field->field_number != fields::summary::kValue || field->type != WireType::kLengthDelimited)
      continue;
    HP_RETURN_IF_ERROR(ScanValue(field->bytes, out).WithContext(StrCat("value[", index++, "]")));
  }
}

}  // namespace

Result<std::vector<Scalar>> DecodeScalars(std::string_view event) {
  namespace e = fields::event;
  std::vector<Scalar> scalars;
  int64_t step = 0;
  double wall_time = 0;
  WireReader reader(event);
  while (true) {
    Result<std::optional<Field>> next = reader.Next();
    if (!next.ok()) return next.status().WithContext("Event");
    if (!*next) break;
    const Field& field = **next;
    if (field.field_number == e::kWallTime && field.type == WireType::kFixed64) {
      wall_time = wire::DoubleFromBits(field.number);
    } else if (field.field_number == e::kStep && field.type == WireType::kVarint) {
      step = static_cast<int64_t>(field.number);
    } else if (field.field_number == e::kSummary && field.type == WireType::kLengthDelimited) {
      HP_RETURN_IF_ERROR(ScanSummary(field.bytes, scalars).WithContext("Event.summary"));
    } else if (field.field_number >= e::kFileVersion && field.field_number <= 9 &&
               field.field_number != e::kSummary) {
      scalars.clear();  // another member of the oneof `what` replaces the summary
    }
  }
  for (Scalar& scalar : scalars) {
    scalar.step = step;
    scalar.wall_time = wall_time;
  }
  return scalars;
}

}  // namespace hyperpack::tensorboard
