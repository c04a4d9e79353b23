#include "wire.h"

#include <array>

namespace hyperpack::tensorboard::wire {
namespace {

// protobuf's own parser stops at 100 levels; event files have no groups at all, so a small bound
// costs nothing real and keeps the skip's stack fixed.
constexpr size_t kMaxGroupDepth = 64;
constexpr size_t kMaxVarintBytes = 10;

Result<uint64_t> ReadLittleEndian(std::string_view& bytes, size_t size) {
  if (bytes.size() < size)
    return Status::Invalid("fixed", size * 8, " value needs ", size, " bytes, ", bytes.size(),
                           " left");
  uint64_t value = 0;
  for (size_t i = 0; i < size; ++i)
    value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  bytes.remove_prefix(size);
  return value;
}

}  // namespace

Result<uint64_t> ReadVarint(std::string_view& bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < kMaxVarintBytes; ++i) {
    if (i == bytes.size()) return Status::Invalid("varint runs past the end");
    const auto byte = static_cast<uint8_t>(bytes[i]);
    // Bits past the 64th (the 10th byte's upper six) are dropped, as protobuf's parser does.
    value |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      bytes.remove_prefix(i + 1);
      return value;
    }
  }
  return Status::Invalid("varint longer than ", kMaxVarintBytes, " bytes");
}

Result<Field> WireReader::ReadField() {
  HP_ASSIGN_OR_RETURN(const uint64_t key, ReadVarint(rest_));
  Field field;
  const uint64_t number = key >> 3;
  if (number == 0 || number > kMaxFieldNumber)
    return Status::Invalid("field number ", number, " out of range");
  field.field_number = static_cast<uint32_t>(number);
  field.type = static_cast<WireType>(key & 7);
  switch (field.type) {
    case WireType::kVarint: {
      HP_ASSIGN_OR_RETURN(field.number, ReadVarint(rest_));
      return field;
    }
    case WireType::kFixed64: {
      HP_ASSIGN_OR_RETURN(field.number, ReadLittleEndian(rest_, 8));
      return field;
    }
    case WireType::kFixed32: {
      HP_ASSIGN_OR_RETURN(field.number, ReadLittleEndian(rest_, 4));
      return field;
    }
    case WireType::kLengthDelimited: {
      HP_ASSIGN_OR_RETURN(const uint64_t length, ReadVarint(rest_));
      if (length > rest_.size())
        return Status::Invalid("field ", number, ": length ", length, " past the end (",
                               rest_.size(), " bytes left)");
      field.bytes = rest_.substr(0, length);
      rest_.remove_prefix(length);
      return field;
    }
    case WireType::kStartGroup:
    case WireType::kEndGroup:
      return field;
  }
  return Status::Invalid("field ", number, ": wire type ", key & 7, " does not exist");
}

Status WireReader::SkipGroup(uint32_t field_number) {
  std::array<uint32_t, kMaxGroupDepth> open{};
  size_t depth = 0;
  open[depth++] = field_number;
  while (depth > 0) {
    if (rest_.empty()) return Status::Invalid("group ", open[depth - 1], " is not closed");
    HP_ASSIGN_OR_RETURN(const Field field, ReadField());
    if (field.type == WireType::kEndGroup) {
      if (field.field_number != open[depth - 1])
        return Status::Invalid("group ", open[depth - 1], " closed as ", field.field_number);
      --depth;
    } else if (field.type == WireType::kStartGroup) {
      if (depth == kMaxGroupDepth)
        return Status::Invalid("groups nested deeper than ", kMaxGroupDepth);
      open[depth++] = field.field_number;
    }
  }
  return Status::Ok();
}

Result<std::optional<Field>> WireReader::Next() {
  while (!rest_.empty()) {
    HP_ASSIGN_OR_RETURN(Field field, ReadField());
    if (field.type == WireType::kEndGroup)
      return Status::Invalid("end of group ", field.field_number, " that was not started");
    if (field.type != WireType::kStartGroup) return std::optional<Field>(field);
    HP_RETURN_IF_ERROR(SkipGroup(field.field_number));
  }
  return std::optional<Field>();
}

void WireWriter::Key(uint32_t field_number, WireType type) {
  RawVarint((static_cast<uint64_t>(field_number) << 3) | static_cast<uint64_t>(type));
}

void WireWriter::RawVarint(uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

void WireWriter::RawLittleEndian(uint64_t value, int size) {
  for (int i = 0; i < size; ++i) out_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void WireWriter::Varint(uint32_t field_number, uint64_t value) {
  Key(field_number, WireType::kVarint);
  RawVarint(value);
}

void WireWriter::Fixed32(uint32_t field_number, uint32_t value) {
  Key(field_number, WireType::kFixed32);
  RawLittleEndian(value, 4);
}

void WireWriter::Fixed64(uint32_t field_number, uint64_t value) {
  Key(field_number, WireType::kFixed64);
  RawLittleEndian(value, 8);
}

void WireWriter::Bytes(uint32_t field_number, std::string_view bytes) {
  Key(field_number, WireType::kLengthDelimited);
  RawVarint(bytes.size());
  out_.append(bytes);
}

}  // namespace hyperpack::tensorboard::wire
