// Fuzzes the TensorBoard event-file codec: the bytes of a file hyperpack follows (a trial's own
// SummaryWriter writes it) go through the incremental record reader, and each record through the
// scalar decoder, inside the scheduler's process. Neither may crash, read out of bounds or
// allocate from an unchecked length; a failure must be a Status.
//
// The input is fed to the reader in chunks whose sizes come from its first byte, so that splits
// inside a header, a length or a CRC are tried; the whole input is also decoded as one Event, so
// that the decoder sees arbitrary bytes, not only those behind a good CRC. Checks: the reader
// returns the same records however the input is split; a record it returns is at most
// kMaxRecordBytes; a framed record reads back as itself.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperpack/tensorboard/events.h"

namespace {

namespace tb = hyperpack::tensorboard;

// Every record and error the reader gives for `input` fed in chunks of `chunk` bytes (0: whole),
// up to the error that loses the framing, if any.
std::vector<std::string> ReadRecords(std::string_view input, size_t chunk) {
  tb::RecordReader reader;
  std::vector<std::string> out;
  const size_t step = chunk == 0 ? std::max<size_t>(input.size(), 1) : chunk;
  for (size_t at = 0; at <= input.size(); at += step) {
    reader.Feed(input.substr(std::min(at, input.size()), step));
    while (true) {
      hyperpack::Result<std::optional<std::string>> next = reader.Next();
      if (!next.ok()) {
        if (next.status().message().empty()) __builtin_trap();
        out.push_back("error: " + next.status().message());
        if (reader.failed()) return out;
        continue;
      }
      if (!*next) break;
      if ((*next)->size() > tb::kMaxRecordBytes) __builtin_trap();
      out.push_back("record: " + **next);
      (void)tb::DecodeScalars(**next);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> whole = ReadRecords(input, 0);
  const size_t chunk = size == 0 ? 1 : 1 + static_cast<uint8_t>(input[0]) % 37;
  if (ReadRecords(input, chunk) != whole) __builtin_trap();

  hyperpack::Result<std::vector<tb::Scalar>> scalars = tb::DecodeScalars(input);
  if (!scalars.ok() && scalars.status().message().empty()) __builtin_trap();

  if (size <= 4096) {
    tb::RecordReader reader;
    reader.Feed(tb::FrameRecord(input));
    hyperpack::Result<std::optional<std::string>> back = reader.Next();
    if (!back.ok() || !*back || **back != input) __builtin_trap();
  }
  return 0;
}
