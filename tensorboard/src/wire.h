// The protobuf wire format, by hand: the few messages of an event file need varints,
// length-delimited fields and fixed32/fixed64, and nothing of a protobuf library.
//
// WireReader walks one message's fields in order; it validates every key and length against the
// bytes it was given, skips groups (wire types 3 and 4) whole, and returns an error value for
// anything malformed. It never allocates: a length-delimited field is a view into the input.
// WireWriter appends fields to a string. Thread-safety: plain values, one owner at a time.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "hyperpack/status.h"

namespace hyperpack::tensorboard::wire {

enum class WireType : uint8_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// The largest field number protobuf allows (2^29 - 1).
inline constexpr uint32_t kMaxFieldNumber = (uint32_t{1} << 29) - 1;

// One field. `number` is the value of a varint, fixed32 or fixed64 field; `bytes` the payload of
// a length-delimited one (a view into the reader's input). A group is skipped and not returned.
struct Field {
  uint32_t field_number = 0;
  WireType type = WireType::kVarint;
  uint64_t number = 0;
  std::string_view bytes;
};

class WireReader {
 public:
  explicit WireReader(std::string_view message) : rest_(message) {}

  // The next field, groups stepped over; std::nullopt at the end of the message.
  Result<std::optional<Field>> Next();

 private:
  Result<Field> ReadField();
  Status SkipGroup(uint32_t field_number);

  std::string_view rest_;
};

// A varint read from the front of `bytes`, which then starts after it.
Result<uint64_t> ReadVarint(std::string_view& bytes);

// The payload of fixed fields as the types they carry.
inline float FloatFromBits(uint64_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits));
}
inline double DoubleFromBits(uint64_t bits) { return std::bit_cast<double>(bits); }

// Fields appended in the order called. Writes what it is told: leaving out proto3 defaults is the
// caller's choice (a oneof member must be written even when it is the default).
class WireWriter {
 public:
  void Varint(uint32_t field_number, uint64_t value);
  void Int64(uint32_t field_number, int64_t value) {
    Varint(field_number, static_cast<uint64_t>(value));
  }
  void Fixed32(uint32_t field_number, uint32_t value);
  void Fixed64(uint32_t field_number, uint64_t value);
  void Float(uint32_t field_number, float value) {
    Fixed32(field_number, std::bit_cast<uint32_t>(value));
  }
  void Double(uint32_t field_number, double value) {
    Fixed64(field_number, std::bit_cast<uint64_t>(value));
  }
  // A string, bytes, an embedded message (serialized) or a packed repeated field.
  void Bytes(uint32_t field_number, std::string_view bytes);

  const std::string& bytes() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Key(uint32_t field_number, WireType type);
  void RawVarint(uint64_t value);
  void RawLittleEndian(uint64_t value, int size);

  std::string out_;
};

}  // namespace hyperpack::tensorboard::wire
