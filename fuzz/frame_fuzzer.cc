// Fuzzes the cluster protocol's decoder: a frame body from the network, through ParseFrame, TypeOf
// and its type's FromJson. They answer a malformed frame with an error value (the server closes
// that one connection and goes on); an exception escaping them would take the server down, so it
// is left to abort here and libFuzzer reports it. A frame that decodes must also survive a round
// trip: encoded again, it decodes to the same message.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol.h"

namespace {

namespace protocol = hyperpack::scheduler::protocol;
using protocol::Json;

template <typename Message>
void CheckMessage(const Json& frame) {
  const hyperpack::Result<Message> message = Message::FromJson(frame);
  if (!message.ok()) return;
  const Json wire = message->ToJson();
  const hyperpack::Result<std::string> encoded = protocol::EncodeFrame(wire);
  if (!encoded.ok()) {
    // Being over the limit is the only reason EncodeFrame may refuse.
    const std::string body = wire.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (body.size() <= protocol::kMaxFrame) __builtin_trap();
    return;
  }
  if (encoded->size() < 4) __builtin_trap();
  // What we encoded must decode: an error now is a bug and aborts.
  const hyperpack::Result<Json> again = protocol::ParseFrame(std::string_view(*encoded).substr(4));
  if (!again.ok()) __builtin_trap();
  const auto type_again = protocol::TypeOf(*again), type = protocol::TypeOf(wire);
  if (!type_again.ok() || !type.ok() || *type_again != *type) __builtin_trap();
  const hyperpack::Result<Message> back = Message::FromJson(*again);
  if (!back.ok() || back->ToJson() != wire) __builtin_trap();
}

// The message of `type` that `frame` says it is, through CheckMessage.
void CheckByType(protocol::FrameType type, const Json& frame) {
  using protocol::FrameType;
  switch (type) {
    case FrameType::kChallenge:
      CheckMessage<protocol::Challenge>(frame);
      break;
    case FrameType::kHello:
      CheckMessage<protocol::Hello>(frame);
      break;
    case FrameType::kWelcome:
      CheckMessage<protocol::Welcome>(frame);
      break;
    case FrameType::kRegister:
      CheckMessage<protocol::Register>(frame);
      break;
    case FrameType::kHeartbeat:
      CheckMessage<protocol::Heartbeat>(frame);
      break;
    case FrameType::kLaunch:
      CheckMessage<protocol::Launch>(frame);
      break;
    case FrameType::kKill:
      CheckMessage<protocol::Kill>(frame);
      break;
    case FrameType::kLine:
      CheckMessage<protocol::Line>(frame);
      break;
    case FrameType::kExit:
      CheckMessage<protocol::Exit>(frame);
      break;
    case FrameType::kSubmit:
      CheckMessage<protocol::Submit>(frame);
      break;
    case FrameType::kProgress:
      CheckMessage<protocol::Progress>(frame);
      break;
    case FrameType::kDone:
      CheckMessage<protocol::Done>(frame);
      break;
    case FrameType::kAccepted:
      CheckMessage<protocol::Accepted>(frame);
      break;
    case FrameType::kCancel:
      CheckMessage<protocol::Cancel>(frame);
      break;
    case FrameType::kRequest:
      CheckMessage<protocol::Request>(frame);
      break;
    case FrameType::kReply:
      CheckMessage<protocol::Reply>(frame);
      break;
    default:
      // A type protocol.h has added since this switch was written: decoded above, no struct here.
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const hyperpack::Result<Json> parsed = protocol::ParseFrame(body);
  if (!parsed.ok()) return 0;
  const hyperpack::Result<protocol::FrameType> decoded = protocol::TypeOf(*parsed);
  if (!decoded.ok()) return 0;
  CheckByType(*decoded, *parsed);
  return 0;
}
