// CRC-32C and the TFRecord framing.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hyperpack/tensorboard/events.h"

namespace hyperpack::tensorboard {
namespace {

constexpr uint32_t kCrc32cPolynomial = 0x82F63B78;  // reflected Castagnoli
constexpr uint32_t kCrcMaskDelta = 0xa282ead8;
constexpr size_t kLengthBytes = 8;
constexpr size_t kCrcBytes = 4;
constexpr size_t kHeaderBytes = kLengthBytes + kCrcBytes;

constexpr std::array<uint32_t, 256> MakeCrc32cTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? kCrc32cPolynomial : 0);
    table[i] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = MakeCrc32cTable();

uint64_t LoadLittleEndian(std::string_view bytes, size_t size) {
  uint64_t value = 0;
  for (size_t i = 0; i < size; ++i)
    value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  return value;
}

void AppendLittleEndian(std::string& out, uint64_t value, size_t size) {
  for (size_t i = 0; i < size; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

uint32_t Crc32c(std::string_view bytes) {
  // A byte at a time from a table: event files are small and written a record a step, so the
  // slicing-by-8 or SSE4.2 variants would buy nothing measurable here.
  uint32_t crc = 0xffffffff;
  for (char c : bytes) crc = kCrc32cTable[(crc ^ static_cast<uint8_t>(c)) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffff;
}

uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta; }

std::string FrameRecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + kRecordOverheadBytes);
  AppendLittleEndian(out, data.size(), kLengthBytes);
  AppendLittleEndian(out, MaskedCrc32c(out), kCrcBytes);
  out.append(data);
  AppendLittleEndian(out, MaskedCrc32c(data), kCrcBytes);
  return out;
}

void RecordReader::Feed(std::string_view bytes) {
  if (failed()) return;
  // What was returned is dropped before more is kept: between feeds the buffer holds at most the
  // unread tail, so a followed file costs one record's worth, not the file's.
  if (position_ > 0) {
    buffer_.erase(0, position_);
    position_ = 0;
  }
  buffer_.append(bytes);
}

Result<std::optional<std::string>> RecordReader::Next() {
  if (failed()) return failure_;
  const std::string_view rest = std::string_view(buffer_).substr(position_);
  if (rest.size() < kHeaderBytes) return std::optional<std::string>();
  const uint64_t length = LoadLittleEndian(rest, kLengthBytes);
  const auto length_crc = static_cast<uint32_t>(LoadLittleEndian(rest.substr(kLengthBytes), 4));
  if (MaskedCrc32c(rest.substr(0, kLengthBytes)) != length_crc) {
    failure_ = Status::Invalid("record at byte ", offset_,
                               ": its length fails its CRC; the records after it cannot be found");
  } else if (length > kMaxRecordBytes) {
    failure_ = Status::Invalid("record at byte ", offset_, ": length ", length, " exceeds the ",
                               kMaxRecordBytes, "-byte limit");
  }
  if (failed()) {
    buffer_.clear();
    buffer_.shrink_to_fit();
    position_ = 0;
    return failure_;
  }
  const size_t total = kHeaderBytes + static_cast<size_t>(length) + kCrcBytes;
  if (rest.size() < total) return std::optional<std::string>();
  const std::string_view data = rest.substr(kHeaderBytes, length);
  const auto data_crc =
      static_cast<uint32_t>(LoadLittleEndian(rest.substr(kHeaderBytes + length), 4));
  const uint64_t start = offset_;
  position_ += total;
  offset_ += total;
  if (MaskedCrc32c(data) != data_crc)
    return Status::Invalid("record at byte ", start, " (", length,
                           " bytes): its data fails its CRC; skipped");
  return std::optional<std::string>(std::string(data));
}

}  // namespace hyperpack::tensorboard
