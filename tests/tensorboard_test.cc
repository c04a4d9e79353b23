// hyperpack::tensorboard: CRC-32C and the TFRecord framing, the incremental reader on whole,
// split, truncated and corrupt streams, the scalars of Events built by hand here (field by field
// from the .proto files, not with the library's writer), and the bytes of the Events it writes.
//
// With HYPERPACK_TFEVENTS_DIR set, EncodedLogDirectoryIsReadBack also leaves a TensorBoard log
// directory there (an experiment, and a trial's session and scalars) for bench/tfevents_check.sh
// and `tensorboard --logdir`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "hyperpack/tensorboard/events.h"

namespace hyperpack::tensorboard {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using namespace std::string_view_literals;

// ---- A protobuf writer of the test's own
// ---------------------------------------------------------

// Builds a message field by field. Kept apart from the library's writer so that a shared mistake
// cannot pass unseen.
class Proto {
 public:
  Proto& Varint(uint32_t field, uint64_t value) { return Key(field, 0).Raw(value); }
  Proto& Fixed64(uint32_t field, uint64_t value) { return Key(field, 1).Le(value, 8); }
  Proto& Fixed32(uint32_t field, uint32_t value) { return Key(field, 5).Le(value, 4); }
  Proto& Double(uint32_t field, double value) {
    return Fixed64(field, std::bit_cast<uint64_t>(value));
  }
  Proto& Float(uint32_t field, float value) {
    return Fixed32(field, std::bit_cast<uint32_t>(value));
  }
  Proto& Bytes(uint32_t field, std::string_view bytes) {
    Key(field, 2).Raw(bytes.size());
    text_.append(bytes);
    return *this;
  }
  Proto& Message(uint32_t field, const Proto& message) { return Bytes(field, message.str()); }
  Proto& Key(uint32_t field, int wire_type) { return Raw((uint64_t{field} << 3) | wire_type); }
  Proto& Raw(uint64_t value) {
    for (; value >= 0x80; value >>= 7) text_.push_back(static_cast<char>((value & 0x7f) | 0x80));
    text_.push_back(static_cast<char>(value));
    return *this;
  }
  Proto& Le(uint64_t value, int size) {
    for (int i = 0; i < size; ++i) text_.push_back(static_cast<char>(value >> (8 * i)));
    return *this;
  }
  Proto& Append(std::string_view bytes) {
    text_.append(bytes);
    return *this;
  }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

// Field numbers, from event.proto, summary.proto, tensor.proto and tensor_shape.proto.
constexpr uint32_t kWallTime = 1, kStep = 2, kFileVersionField = 3, kGraphDef = 4, kSummary = 5;
constexpr uint32_t kValue = 1;
constexpr uint32_t kTag = 1, kSimpleValue = 2, kImage = 4, kTensor = 8, kMetadata = 9;
constexpr uint32_t kDtype = 1, kShape = 2, kContent = 4, kFloatVal = 5, kDoubleVal = 6, kIntVal = 7,
                   kInt64Val = 10, kHalfVal = 13;
constexpr uint64_t kDtFloat = 1, kDtDouble = 2, kDtInt32 = 3, kDtString = 7, kDtInt64 = 9,
                   kDtHalf = 19;

// A TensorShapeProto with these dims.
Proto Shape(std::vector<int64_t> dims) {
  Proto shape;
  for (int64_t size : dims) shape.Message(2, Proto().Varint(1, static_cast<uint64_t>(size)));
  return shape;
}

// metadata.plugin_data.plugin_name = `plugin`.
Proto PluginMetadata(std::string_view plugin) {
  return Proto().Message(1, Proto().Bytes(1, plugin));
}

// An Event at step 3, time 100.5, whose summary has one value: `tag` with `value_fields` after it.
std::string EventWith(const Proto& value_fields, std::string_view tag = "loss") {
  Proto value;
  value.Bytes(kTag, tag).Append(value_fields.str());
  return Proto()
      .Double(kWallTime, 100.5)
      .Varint(kStep, 3)
      .Message(kSummary, Proto().Message(kValue, value))
      .str();
}

std::vector<Scalar> DecodeOk(std::string_view event) {
  Result<std::vector<Scalar>> scalars = DecodeScalars(event);
  EXPECT_TRUE(scalars.ok()) << scalars.status().message();
  return scalars.ok() ? *scalars : std::vector<Scalar>{};
}

std::string DecodeError(std::string_view event) {
  Result<std::vector<Scalar>> scalars = DecodeScalars(event);
  EXPECT_FALSE(scalars.ok());
  if (scalars.ok()) return "";
  EXPECT_EQ(scalars.status().code(), StatusCode::kInvalidArgument);
  return scalars.status().message();
}

// The one scalar `event` carries; NaN when it carries none or several.
double OneValue(std::string_view event) {
  const std::vector<Scalar> scalars = DecodeOk(event);
  EXPECT_EQ(scalars.size(), 1u);
  return scalars.size() == 1 ? scalars[0].value : std::numeric_limits<double>::quiet_NaN();
}

// ---- CRC-32C and masking ------------------------------------------------------------------------

TEST(Crc32cTest, MatchesThePublishedCheckValue) { EXPECT_EQ(Crc32c("123456789"), 0xE3069283u); }

TEST(Crc32cTest, MatchesTheIscsiTestVectorsOfRfc3720) {
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(descending), 0x113FDB5Cu);
}

TEST(MaskCrcTest, RotatesRightBy15AndAddsTheDelta) {
  EXPECT_EQ(MaskCrc(0), 0xa282ead8u);
  EXPECT_EQ(MaskCrc(0x12345678), 0x4F730F40u);  // 0xACF02468 + 0xa282ead8, wrapped
  EXPECT_EQ(MaskedCrc32c("123456789"), MaskCrc(0xE3069283));
}

// ---- Framing ------------------------------------------------------------------------------------

TEST(FrameRecordTest, WritesLengthItsCrcDataAndItsCrc) {
  const std::string record = FrameRecord("abc");
  ASSERT_EQ(record.size(), 3 + kRecordOverheadBytes);
  EXPECT_EQ(record.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(record.substr(8, 4), Proto().Le(MaskedCrc32c(record.substr(0, 8)), 4).str());
  EXPECT_EQ(record.substr(12, 3), "abc");
  EXPECT_EQ(record.substr(15, 4), Proto().Le(MaskedCrc32c("abc"), 4).str());
}

TEST(FrameRecordTest, FramesTheFileVersionEventAsTensorFlowsFilesBegin) {
  // Every event file TensorFlow or PyTorch writes starts with these 12 bytes: the length 24 of
  // its file_version Event and that length's masked CRC.
  const std::string record = FrameRecord(EncodeFileVersionEvent(1700000000.25));
  EXPECT_EQ(record.substr(0, 12), std::string("\x18\0\0\0\0\0\0\0\xa3\x7f\x4b\x22", 12));
}

// The records `reader` returns up to the end of what it was fed or up to its first error, which
// goes to `error`.
std::vector<std::string> ReadUntilError(RecordReader& reader, Status& error) {
  std::vector<std::string> records;
  while (true) {
    Result<std::optional<std::string>> next = reader.Next();
    error = next.status();
    if (!next.ok() || !*next) return records;
    records.push_back(**next);
  }
}

std::vector<std::string> ReadAll(RecordReader& reader) {
  Status error;
  std::vector<std::string> records = ReadUntilError(reader, error);
  EXPECT_TRUE(error.ok()) << error.message();
  return records;
}

std::vector<std::string> SomeRecords(std::mt19937& rng) {
  std::vector<std::string> records = {"", "x"};
  std::uniform_int_distribution<int> size(0, 3000), byte(0, 255);
  for (int i = 0; i < 40; ++i) {
    std::string data(size(rng), '\0');
    for (char& c : data) c = static_cast<char>(byte(rng));
    records.push_back(data);
  }
  return records;
}

TEST(RecordReaderTest, ReadsBackEveryRecordFedWhole) {
  std::mt19937 rng(1);
  const std::vector<std::string> records = SomeRecords(rng);
  std::string stream;
  for (const std::string& data : records) stream += FrameRecord(data);
  RecordReader reader;
  reader.Feed(stream);
  EXPECT_EQ(ReadAll(reader), records);
  EXPECT_EQ(reader.buffered_bytes(), 0u);
  EXPECT_EQ(reader.offset(), stream.size());
}

TEST(RecordReaderTest, ReadsTheSameRecordsFedOneByteAtATime) {
  std::mt19937 rng(2);
  const std::vector<std::string> records = SomeRecords(rng);
  std::string stream;
  for (const std::string& data : records) stream += FrameRecord(data);
  RecordReader reader;
  std::vector<std::string> read;
  for (char c : stream) {
    reader.Feed(std::string_view(&c, 1));
    for (std::string& data : ReadAll(reader)) read.push_back(std::move(data));
  }
  EXPECT_EQ(read, records);
}

TEST(RecordReaderTest, ReadsTheSameRecordsFedInRandomChunks) {
  for (unsigned seed = 3; seed < 13; ++seed) {
    std::mt19937 rng(seed);
    const std::vector<std::string> records = SomeRecords(rng);
    std::string stream;
    for (const std::string& data : records) stream += FrameRecord(data);
    std::uniform_int_distribution<size_t> chunk(0, 5000);
    RecordReader reader;
    std::vector<std::string> read;
    for (size_t at = 0; at < stream.size();) {
      const size_t size = std::min(chunk(rng), stream.size() - at);
      reader.Feed(std::string_view(stream).substr(at, size));
      at += size;
      for (std::string& data : ReadAll(reader)) read.push_back(std::move(data));
    }
    EXPECT_EQ(read, records) << "seed " << seed;
  }
}

TEST(RecordReaderTest, KeepsATruncatedTailAndReadsItWhenTheRestArrives) {
  const std::string first = FrameRecord("first"), second = FrameRecord("second record");
  for (size_t cut = 0; cut < second.size(); ++cut) {
    RecordReader reader;
    reader.Feed(first + second.substr(0, cut));
    EXPECT_THAT(ReadAll(reader), ElementsAre("first")) << "cut " << cut;
    EXPECT_EQ(reader.buffered_bytes(), cut);
    EXPECT_EQ(reader.offset(), first.size());
    reader.Feed(second.substr(cut));
    EXPECT_THAT(ReadAll(reader), ElementsAre("second record")) << "cut " << cut;
  }
}

TEST(RecordReaderTest, AFlippedDataBitIsReportedAndTheNextRecordStillRead) {
  std::string stream = FrameRecord("first") + FrameRecord("second") + FrameRecord("third");
  const size_t second_data = FrameRecord("first").size() + 12;
  stream[second_data + 2] ^= 0x10;
  RecordReader reader;
  reader.Feed(stream);
  Status corrupt;
  EXPECT_THAT(ReadUntilError(reader, corrupt), ElementsAre("first"));
  EXPECT_THAT(corrupt.message(), HasSubstr("record at byte 21 (6 bytes): its data fails its CRC"));
  EXPECT_FALSE(reader.failed());
  EXPECT_THAT(ReadAll(reader), ElementsAre("third"));
}

TEST(RecordReaderTest, AFlippedBitInTheDataCrcIsReportedToo) {
  std::string stream = FrameRecord("payload");
  stream.back() ^= 0x01;
  RecordReader reader;
  reader.Feed(stream);
  EXPECT_FALSE(reader.Next().ok());
}

TEST(RecordReaderTest, AFlippedLengthBitLosesTheFramingForGood) {
  for (size_t bit = 0; bit < 64 + 32; ++bit) {  // the length and its CRC
    std::string stream = FrameRecord("first") + FrameRecord("second");
    stream[21 + bit / 8] ^= static_cast<char>(1 << (bit % 8));
    RecordReader reader;
    reader.Feed(stream);
    Status corrupt;
    EXPECT_THAT(ReadUntilError(reader, corrupt), ElementsAre("first")) << "bit " << bit;
    EXPECT_THAT(corrupt.message(), HasSubstr("record at byte 21: its length fails its CRC"));
    EXPECT_TRUE(reader.failed());
    reader.Feed(FrameRecord("more"));
    EXPECT_FALSE(reader.Next().ok());  // the same error, every time
    EXPECT_EQ(reader.buffered_bytes(), 0u);
  }
}

TEST(RecordReaderTest, RefusesAnOversizeLengthFromItsHeaderAlone) {
  for (uint64_t length : {kMaxRecordBytes + 1, uint64_t{1} << 40, ~uint64_t{0}}) {
    Proto header;
    header.Le(length, 8);
    header.Le(MaskedCrc32c(header.str()), 4);
    RecordReader reader;
    reader.Feed(header.str());  // no data follows: nothing is waited for, nothing sized
    Result<std::optional<std::string>> next = reader.Next();
    ASSERT_FALSE(next.ok());
    EXPECT_THAT(next.status().message(), HasSubstr("exceeds the 16777216-byte limit"));
    EXPECT_EQ(reader.buffered_bytes(), 0u);
  }
}

TEST(RecordReaderTest, AcceptsARecordOfExactlyTheLimit) {
  const std::string data(kMaxRecordBytes, 'z');
  RecordReader reader;
  reader.Feed(FrameRecord(data));
  Result<std::optional<std::string>> next = reader.Next();
  ASSERT_TRUE(next.ok()) << next.status().message();
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ((*next)->size(), kMaxRecordBytes);
}

// ---- Scalars ------------------------------------------------------------------------------------

TEST(DecodeScalarsTest, ReadsASimpleValueWithItsStepAndTime) {
  const std::string event = EventWith(Proto().Float(kSimpleValue, 0.25f));
  EXPECT_THAT(DecodeOk(event), ElementsAre(Scalar{"loss", 3, 100.5, 0.25}));
}

TEST(DecodeScalarsTest, ReadsEveryValueOfASummaryAndStepAndTimeWrittenAfterIt) {
  const Proto summary = Proto()
                            .Message(kValue, Proto().Bytes(kTag, "a").Float(kSimpleValue, 1))
                            .Message(kValue, Proto().Bytes(kTag, "b").Float(kSimpleValue, -2));
  const std::string event =
      Proto().Message(kSummary, summary).Varint(kStep, 9).Double(kWallTime, 7).str();
  EXPECT_THAT(DecodeOk(event), ElementsAre(Scalar{"a", 9, 7, 1}, Scalar{"b", 9, 7, -2}));
}

TEST(DecodeScalarsTest, ReadsANegativeStep) {
  const std::string event =
      Proto()
          .Varint(kStep, static_cast<uint64_t>(int64_t{-5}))
          .Message(kSummary, Proto().Message(kValue, Proto().Float(kSimpleValue, 1)))
          .str();
  ASSERT_EQ(DecodeOk(event).size(), 1u);
  EXPECT_EQ(DecodeOk(event)[0].step, -5);
}

// A TF2 scalar: a DT_FLOAT rank-0 tensor with the "scalars" plugin's metadata.
Proto Tf2Tensor(uint64_t dtype, const Proto& values, std::vector<int64_t> dims = {}) {
  Proto tensor;
  tensor.Varint(kDtype, dtype).Message(kShape, Shape(dims)).Append(values.str());
  return Proto().Message(kTensor, tensor).Message(kMetadata, PluginMetadata("scalars"));
}

// tensor_content: the value's little-endian bytes.
Proto Content(uint64_t bits, int size) {
  return Proto().Bytes(kContent, Proto().Le(bits, size).str());
}

TEST(DecodeScalarsTest, ReadsATensorScalarFromTensorContent) {
  const uint64_t big = uint64_t{1} << 40;
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtFloat, Content(std::bit_cast<uint32_t>(0.5f), 4)))),
            0.5);
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtDouble, Content(std::bit_cast<uint64_t>(0.1), 8)))),
            0.1);
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtInt64, Content(big, 8)))), static_cast<double>(big));
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtInt32, Content(0xffffffff, 4)))), -1);
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtHalf, Content(0x3c00, 2)))), 1.0);
}

TEST(DecodeScalarsTest, ReadsATensorScalarFromPackedValFields) {
  Proto floats, doubles, ints, int64s, halves;
  floats.Bytes(kFloatVal, Proto().Le(std::bit_cast<uint32_t>(2.5f), 4).str());
  doubles.Bytes(kDoubleVal, Proto().Le(std::bit_cast<uint64_t>(-0.125), 8).str());
  ints.Bytes(kIntVal, Proto().Raw(static_cast<uint64_t>(int64_t{-7})).str());
  int64s.Bytes(kInt64Val, Proto().Raw(123456789012).str());
  halves.Bytes(kHalfVal, Proto().Raw(0xc100).str());  // -2.5 in half precision
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtFloat, floats))), 2.5);
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtDouble, doubles))), -0.125);
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtInt32, ints))), -7);
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtInt64, int64s))), 123456789012.0);
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtHalf, halves))), -2.5);
}

TEST(DecodeScalarsTest, ReadsATensorScalarFromUnpackedValFields) {
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtFloat, Proto().Float(kFloatVal, 4.0f)))), 4.0);
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtDouble, Proto().Double(kDoubleVal, 1e-9)))), 1e-9);
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtInt64, Proto().Varint(kInt64Val, 42)))), 42.0);
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtInt32, Proto().Varint(kIntVal, 3)))), 3.0);
}

TEST(DecodeScalarsTest, ReadsAOneElementTensorAndOneWithoutMetadata) {
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtFloat, Proto().Float(kFloatVal, 1.5f), {1, 1}))), 1.5);
  const Proto bare = Proto().Message(
      kTensor, Proto().Varint(kDtype, kDtDouble).Message(kShape, Shape({})).Double(kDoubleVal, 8));
  EXPECT_EQ(OneValue(EventWith(bare)), 8.0);
}

TEST(DecodeScalarsTest, ATensorScalarWithNoValuesIsZeroAsInTensorFlow) {
  EXPECT_EQ(OneValue(EventWith(Tf2Tensor(kDtFloat, Proto()))), 0.0);
}

TEST(DecodeScalarsTest, SkipsTensorsThatAreNotNumericScalars) {
  const Proto two = Proto().Bytes(kFloatVal, Proto().Le(0, 4).Le(0, 4).str());
  EXPECT_THAT(DecodeOk(EventWith(Tf2Tensor(kDtFloat, two, {2}))), IsEmpty());
  EXPECT_THAT(DecodeOk(EventWith(Tf2Tensor(kDtFloat, Proto(), {0}))), IsEmpty());
  EXPECT_THAT(DecodeOk(EventWith(Tf2Tensor(kDtFloat, Proto(), {-1}))), IsEmpty());
  EXPECT_THAT(DecodeOk(EventWith(Tf2Tensor(kDtString, Proto().Bytes(8, "text")))), IsEmpty());
  const Proto unknown_rank = Proto().Message(
      kTensor, Proto().Varint(kDtype, kDtFloat).Message(kShape, Proto().Varint(3, 1)));
  EXPECT_THAT(DecodeOk(EventWith(unknown_rank)), IsEmpty());
}

TEST(DecodeScalarsTest, SkipsAScalarTensorOfAnotherPlugin) {
  const Proto text = Proto()
                         .Message(kTensor, Proto().Varint(kDtype, kDtFloat).Float(kFloatVal, 1))
                         .Message(kMetadata, PluginMetadata("custom_plugin"));
  EXPECT_THAT(DecodeOk(EventWith(text)), IsEmpty());
}

TEST(DecodeScalarsTest, SkipsImagesHistogramsGraphsAndFileVersions) {
  EXPECT_THAT(DecodeOk(EventWith(Proto().Message(kImage, Proto().Varint(1, 28)))), IsEmpty());
  EXPECT_THAT(DecodeOk(EventWith(Proto().Message(5, Proto().Double(1, 0.5)))), IsEmpty());
  EXPECT_THAT(DecodeOk(Proto().Double(kWallTime, 1).Bytes(kGraphDef, "\x0a\x01x").str()),
              IsEmpty());
  EXPECT_THAT(DecodeOk(EncodeFileVersionEvent(1)), IsEmpty());
  EXPECT_THAT(DecodeOk(""), IsEmpty());
}

TEST(DecodeScalarsTest, TheLastMemberOfAOneofWins) {
  // A simple_value then an image: the Value holds the image.
  EXPECT_THAT(DecodeOk(EventWith(Proto().Float(kSimpleValue, 1).Message(kImage, Proto()))),
              IsEmpty());
  // A summary then a file_version: the Event holds the file version.
  const std::string event = EventWith(Proto().Float(kSimpleValue, 1)) +
                            Proto().Bytes(kFileVersionField, "brain.Event:2").str();
  EXPECT_THAT(DecodeOk(event), IsEmpty());
}

TEST(DecodeScalarsTest, SkipsUnknownFieldsOfEveryWireType) {
  Proto unknown;
  unknown.Varint(100, 1).Fixed64(101, 2).Bytes(102, "junk").Fixed32(103, 3);
  unknown.Key(104, 3).Varint(1, 5).Key(105, 3).Bytes(2, "in").Key(105, 4).Key(104, 4);  // groups
  Proto value;
  value.Append(unknown.str()).Float(kSimpleValue, 6).Append(unknown.str());
  value.Message(kMetadata, Proto().Append(unknown.str()).Bytes(2, "display"));
  const std::string event =
      unknown.str() + EventWith(value) + Proto().Varint(kSummary, 1).Fixed32(kTag, 0).str();
  EXPECT_THAT(DecodeOk(event), ElementsAre(Scalar{"loss", 3, 100.5, 6}));
}

TEST(DecodeScalarsTest, MalformedVarintsAndLengthsAreErrorsThatNameTheField) {
  EXPECT_THAT(DecodeError("\x10"), HasSubstr("varint runs past the end"));
  EXPECT_THAT(DecodeError("\x10\xff\xff"), HasSubstr("varint runs past the end"));
  EXPECT_THAT(DecodeError(std::string("\x10") + std::string(10, '\xff') + "\x01"),
              HasSubstr("longer than 10 bytes"));
  EXPECT_THAT(DecodeError("\x2a\x05\x0a"), HasSubstr("length 5 past the end (1 bytes left)"));
  EXPECT_THAT(DecodeError("\x2a\xff\xff\xff\xff\x0f"), HasSubstr("past the end"));
  EXPECT_THAT(DecodeError("\x09\x00\x00"sv), HasSubstr("needs 8 bytes"));
  EXPECT_THAT(DecodeError("\x0f"), HasSubstr("wire type 7"));
  EXPECT_THAT(DecodeError("\x00\x01"sv), HasSubstr("field number 0"));
  EXPECT_THAT(DecodeError("\x1b\x08\x01"), HasSubstr("group 3 is not closed"));
  EXPECT_THAT(DecodeError("\x1c"), HasSubstr("not started"));
  const std::string nested = EventWith(Proto().Bytes(kTensor, Proto().Key(kShape, 2).Raw(9).str()));
  EXPECT_THAT(DecodeError(nested), HasSubstr("Event.summary: value[0]: tensor: field 2: length 9"));
}

TEST(DecodeScalarsTest, ATensorContentOfTheWrongSizeIsAnError) {
  EXPECT_THAT(DecodeError(EventWith(Tf2Tensor(kDtFloat, Proto().Bytes(kContent, "abc")))),
              HasSubstr("tensor_content of 3 bytes for a scalar of 4-byte elements"));
  EXPECT_THAT(DecodeError(EventWith(Tf2Tensor(kDtFloat, Proto().Bytes(kFloatVal, "abcde")))),
              HasSubstr("not a whole number of 4-byte values"));
}

TEST(DecodeScalarsTest, DeepGroupsAreRefusedNotRecursedInto) {
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += Proto().Key(100, 3).str();
  EXPECT_THAT(DecodeError(deep), HasSubstr("nested deeper than 64"));
}

// ---- Encoding -----------------------------------------------------------------------------------

TEST(EncodeTest, TheFileVersionEventIsItsTimeAndVersion) {
  EXPECT_EQ(
      EncodeFileVersionEvent(1700000000.25),
      Proto().Double(kWallTime, 1700000000.25).Bytes(kFileVersionField, "brain.Event:2").str());
}

TEST(EncodeTest, ScalarsEventsAreSimpleValuesThatDecodeBack) {
  const std::vector<TaggedValue> values = {{"loss", 0.5}, {"accuracy", 0.875}, {"zero", 0}};
  const std::string event = EncodeScalarsEvent(1700000000.5, 12, values);
  EXPECT_EQ(
      event,
      Proto()
          .Double(kWallTime, 1700000000.5)
          .Varint(kStep, 12)
          .Message(kSummary, Proto()
                                 .Message(kValue, Proto().Bytes(kTag, "loss").Float(2, 0.5))
                                 .Message(kValue, Proto().Bytes(kTag, "accuracy").Float(2, 0.875))
                                 .Message(kValue, Proto().Bytes(kTag, "zero").Float(2, 0)))
          .str());
  EXPECT_THAT(DecodeOk(event), ElementsAre(Scalar{"loss", 12, 1700000000.5, 0.5},
                                           Scalar{"accuracy", 12, 1700000000.5, 0.875},
                                           Scalar{"zero", 12, 1700000000.5, 0}));
}

// The Event the HParams plugin's writer makes of one HParamsPluginData member: field numbers from
// plugin_data.proto and summary.proto, the empty tensor from the plugin's metadata.NULL_TENSOR.
std::string HParamsEvent(std::string_view tag, uint32_t member, const Proto& data) {
  const Proto content = Proto().Message(member, data);
  const Proto null_tensor = Proto().Varint(kDtype, kDtFloat).Message(kShape, Proto().Bytes(2, ""));
  const Proto metadata = Proto().Message(1, Proto().Bytes(1, "hparams").Message(2, content));
  const Proto value =
      Proto().Bytes(kTag, tag).Message(kTensor, null_tensor).Message(kMetadata, metadata);
  return Proto().Double(kWallTime, 5).Message(kSummary, Proto().Message(kValue, value)).str();
}

TEST(EncodeTest, ASessionEndIsItsStatusAndTime) {
  EXPECT_EQ(EncodeSessionEndEvent({SessionStatus::kFailure, 1234.5}, 5),
            HParamsEvent("_hparams_/session_end_info", 4, Proto().Varint(1, 2).Double(2, 1234.5)));
}

TEST(EncodeTest, ASessionStartHoldsEachKindOfValueAFalseBoolIncluded) {
  SessionStart start;
  start.hparams = {{"lr", 0.001}, {"optimizer", std::string("adam")}, {"nesterov", false}};
  start.group_name = "trial-7";
  start.start_time_secs = 1700000000;
  // map<string, Value> entries {key = 1, value = 2}, in the map's (sorted) order; Value's
  // number_value = 2, string_value = 3, bool_value = 4 (struct.proto).
  const Proto data =
      Proto()
          .Message(1, Proto().Bytes(1, "lr").Message(2, Proto().Double(2, 0.001)))
          .Message(1, Proto().Bytes(1, "nesterov").Message(2, Proto().Varint(4, 0)))
          .Message(1, Proto().Bytes(1, "optimizer").Message(2, Proto().Bytes(3, "adam")))
          .Bytes(4, "trial-7")
          .Double(5, 1700000000);
  EXPECT_EQ(EncodeSessionStartEvent(start, 5),
            HParamsEvent("_hparams_/session_start_info", 3, data));
}

Experiment SampleExperiment() {
  Experiment experiment;
  experiment.name = "fmnist";
  experiment.time_created_secs = 1700000000;
  experiment.hparam_infos.push_back({"lr", "", "", HParamType::kFloat64, Interval{1e-5, 0.1}});
  experiment.hparam_infos.push_back(
      {"optimizer", "", "", HParamType::kString,
       std::vector<HParamValue>{std::string("adam"), std::string("sgd")}});
  experiment.hparam_infos.push_back(
      {"layers", "Layers", "depth", HParamType::kFloat64, std::vector<HParamValue>{1.0, 2.0}});
  experiment.hparam_infos.push_back({"free", "", "", HParamType::kUnset, std::monostate()});
  experiment.metric_infos.push_back({"", "accuracy", "Accuracy", "", DatasetType::kValidation});
  experiment.metric_infos.push_back({"train", "loss", "", "", DatasetType::kUnknown});
  return experiment;
}

TEST(EncodeTest, AnExperimentHoldsItsHParamsDomainsAndMetrics) {
  // api.proto: Experiment {description 1, user 2, time_created_secs 3, hparam_infos 4,
  // metric_infos 5, name 6}; HParamInfo {name 1, display_name 2, description 3, type 4,
  // domain_discrete 5, domain_interval 6}; MetricInfo {name 1 {group 1, tag 2}, display_name 3,
  // description 4, dataset_type 5}.
  const Proto lr =
      Proto().Bytes(1, "lr").Varint(4, 3).Message(6, Proto().Double(1, 1e-5).Double(2, 0.1));
  const Proto optimizer =
      Proto()
          .Bytes(1, "optimizer")
          .Varint(4, 1)
          .Message(
              5, Proto().Message(1, Proto().Bytes(3, "adam")).Message(1, Proto().Bytes(3, "sgd")));
  const Proto layers =
      Proto()
          .Bytes(1, "layers")
          .Bytes(2, "Layers")
          .Bytes(3, "depth")
          .Varint(4, 3)
          .Message(5, Proto().Message(1, Proto().Double(2, 1)).Message(1, Proto().Double(2, 2)));
  const Proto data =
      Proto()
          .Double(3, 1700000000)
          .Message(4, lr)
          .Message(4, optimizer)
          .Message(4, layers)
          .Message(4, Proto().Bytes(1, "free"))
          .Message(
              5, Proto().Message(1, Proto().Bytes(2, "accuracy")).Bytes(3, "Accuracy").Varint(5, 2))
          .Message(5, Proto().Message(1, Proto().Bytes(1, "train").Bytes(2, "loss")))
          .Bytes(6, "fmnist");
  EXPECT_EQ(EncodeExperimentEvent(SampleExperiment(), 5),
            HParamsEvent("_hparams_/experiment", 2, data));
}

TEST(EncodeTest, HParamsEventsCarryNoScalars) {
  EXPECT_THAT(DecodeOk(EncodeExperimentEvent(SampleExperiment(), 5)), IsEmpty());
  EXPECT_THAT(DecodeOk(EncodeSessionEndEvent({SessionStatus::kSuccess, 9}, 5)), IsEmpty());
}

// ---- Against TensorBoard's own writer ---------------------------------------------------------
// Records made by TensorBoard's Python code at tensorflow/tensorboard 70b76c92 (protobuf 3.21):
// scalar_v2.scalar_pb (what TF2's tf.summary.scalar writes), tensor_util.make_tensor_proto of a
// float64 and an int64 under the "scalars" plugin, a Summary.Value with simple_value (PyTorch's
// SummaryWriter.add_scalar), and hparams summary_v2's hparams_pb, hparams_config_pb and
// _summary_pb of a SessionEndInfo, of the same inputs as TrialRecords and SampleExperiment (the
// experiment's name set on the result of hparams_config_pb, which takes no name).

std::string FromHex(std::string_view hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return bytes;
}

TEST(TensorBoardWriterTest, ItsScalarsInEveryFormDecode) {
  EXPECT_THAT(
      DecodeOk(FromHex(
          "0900002040fc54d94110052a210a1f0a046c6f7373420a080112002a040000803e4a0b0a090a077363616c61"
          "7273")),
      ElementsAre(Scalar{"loss", 5, 1700000000.5, 0.25}));
  EXPECT_THAT(
      DecodeOk(FromHex(
          "0900004040fc54d94110062a240a220a03663634420e0802120032089a9999999999b93f4a0b0a090a077363"
          "616c617273")),
      ElementsAre(Scalar{"f64", 6, 1700000001, 0.1}));
  EXPECT_THAT(
      DecodeOk(FromHex(
          "0900004040fc54d94110062a260a240a03693634421008091200520af9ffffffffffffffff014a0b0a090a07"
          "7363616c617273")),
      ElementsAre(Scalar{"i64", 6, 1700000001, -7}));
  EXPECT_THAT(DecodeOk(FromHex("0900008040fc54d94110072a0c0a0a0a03616363150000403f")),
              ElementsAre(Scalar{"acc", 7, 1700000002, 0.75}));
}

TEST(TensorBoardWriterTest, HParamsEventsAreByteForByteItsOwn) {
  SessionStart start;
  start.hparams = {{"lr", 0.01}, {"optimizer", std::string("adam")}, {"layers", 2.0}};
  start.group_name = "trial-0";
  start.start_time_secs = 1700000001;
  EXPECT_EQ(
      EncodeSessionStartEvent(start, 1700000001),
      FromHex(
          "0900004040fc54d9412a87010a84010a1c5f68706172616d735f2f73657373696f6e5f73746172745f696e66"
          "6f42060801120212004a5c0a5a0a0768706172616d73124f1a4d0a130a066c61796572731209110000000000"
          "0000400a0f0a026c721209117b14ae47e17a843f0a130a096f7074696d697a657212061a046164616d220774"
          "7269616c2d302900004040fc54d941"));
  EXPECT_EQ(
      EncodeSessionEndEvent({SessionStatus::kSuccess, 1700000010}, 1700000010),
      FromHex(
          "0900008042fc54d9412a420a400a1a5f68706172616d735f2f73657373696f6e5f656e645f696e666f420608"
          "01120212004a1a0a180a0768706172616d73120d220b08011100008042fc54d941"));
  EXPECT_EQ(
      EncodeExperimentEvent(SampleExperiment(), 1700000000),
      FromHex(
          "0900000040fc54d9412ae9010ae6010a145f68706172616d735f2f6578706572696d656e7442060801120212"
          "004ac5010ac2010a0768706172616d7312b60112b3011900000040fc54d941221a0a026c722003321209f168"
          "e388b5f8e43e119a9999999999b93f221e0a096f7074696d697a657220012a0f0a061a046164616d0a051a03"
          "73676422310a066c617965727312064c61796572731a05646570746820032a160a0911000000000000f03f0a"
          "0911000000000000004022060a04667265652a180a0a120861636375726163791a0841636375726163792802"
          "2a0f0a0d0a05747261696e12046c6f73733206666d6e697374"));
}

// ---- A log directory ----------------------------------------------------------------------------

// The records of a trial's run: file version, session start, scalars at three steps, session end.
std::vector<std::string> TrialRecords() {
  SessionStart start;
  start.hparams = {{"lr", 0.01}, {"optimizer", std::string("adam")}, {"layers", 2.0}};
  start.group_name = "trial-0";
  start.start_time_secs = 1700000001;
  std::vector<std::string> records = {EncodeFileVersionEvent(1700000001),
                                      EncodeSessionStartEvent(start, 1700000001)};
  for (int step = 1; step <= 3; ++step) {
    const std::vector<TaggedValue> values = {{"accuracy", 0.5 + 0.125 * step},
                                             {"loss", 1.0 / step}};
    records.push_back(EncodeScalarsEvent(1700000001 + step, step, values));
  }
  records.push_back(EncodeSessionEndEvent({SessionStatus::kSuccess, 1700000010}, 1700000010));
  return records;
}

void WriteEventFile(const std::filesystem::path& path, const std::vector<std::string>& records) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  for (const std::string& record : records) out << FrameRecord(record);
  ASSERT_TRUE(out.good()) << path;
}

TEST(LogDirectoryTest, EncodedLogDirectoryIsReadBack) {
  const std::vector<std::string> records = TrialRecords();
  std::string stream;
  for (const std::string& record : records) stream += FrameRecord(record);
  RecordReader reader;
  reader.Feed(stream);
  std::vector<Scalar> scalars;
  for (const std::string& record : ReadAll(reader))
    for (const Scalar& scalar : DecodeOk(record)) scalars.push_back(scalar);
  ASSERT_EQ(scalars.size(), 6u);
  EXPECT_EQ(scalars[4], (Scalar{"accuracy", 3, 1700000004, 0.875}));
  EXPECT_EQ(scalars[5].value, static_cast<double>(static_cast<float>(1.0 / 3)));

  const char* dir = std::getenv("HYPERPACK_TFEVENTS_DIR");
  if (dir == nullptr) return;
  const std::filesystem::path root(dir);
  WriteEventFile(
      root / "events.out.tfevents.1700000000.hyperpack",
      {EncodeFileVersionEvent(1700000000), EncodeExperimentEvent(SampleExperiment(), 1700000000)});
  WriteEventFile(root / "trial-0" / "events.out.tfevents.1700000001.hyperpack", records);
}

}  // namespace
}  // namespace hyperpack::tensorboard
