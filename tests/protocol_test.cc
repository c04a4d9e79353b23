// The typed messages of the serve/agent/client protocol: each one's wire format, its round trip,
// and the error a malformed frame is read as (a value, never an exception).
#include "protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace hyperpack::scheduler::protocol {
namespace {

using ::testing::HasSubstr;

// The error message of decoding `frame` with `decode`; fails when it decodes.
template <typename Decode>
std::string ErrorOf(Decode decode, const Json& frame) {
  auto decoded = decode(frame);
  if (!decoded.ok()) return decoded.status().message();
  ADD_FAILURE() << "no error for " << frame.dump();
  return "";
}

// The value of `r`; fails (and gives T{}) when it is an error.
template <typename T>
T Ok(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : T{};
}

// Encodes `message`, checks the frame is `wire` exactly, and returns the frame read back.
template <typename M>
M RoundTrip(const M& message, const Json& wire) {
  const Json frame = message.ToJson();
  EXPECT_EQ(frame, wire);
  return Ok(M::FromJson(frame));
}

TEST(FrameTypeTest, EveryTypeIsReadBackFromTheNameItIsSentAs) {
  const FrameType all[] = {FrameType::kChallenge, FrameType::kHello,     FrameType::kWelcome,
                           FrameType::kRegister,  FrameType::kHeartbeat, FrameType::kLaunch,
                           FrameType::kKill,      FrameType::kLine,      FrameType::kExit,
                           FrameType::kSubmit,    FrameType::kProgress,  FrameType::kDone};
  for (FrameType type : all)
    EXPECT_EQ(Ok(TypeOf({{"type", FrameTypeName(type)}})), type) << FrameTypeName(type);
}

TEST(FrameTypeTest, AnUnknownTypeIsAnErrorThatNamesIt) {
  EXPECT_THAT(ErrorOf(TypeOf, {{"type", "teleport"}}), HasSubstr("unknown frame type 'teleport'"));
}

TEST(FrameTypeTest, AMissingOrNonStringTypeIsAnErrorThatSaysSo) {
  EXPECT_THAT(ErrorOf(TypeOf, {{"trial", 1}}), HasSubstr("without a 'type'"));
  EXPECT_THAT(ErrorOf(TypeOf, Json::array()), HasSubstr("without a 'type'"));
  EXPECT_THAT(ErrorOf(TypeOf, {{"type", 7}}), HasSubstr("'type' is not a string"));
}

TEST(HandshakeMessagesTest, RoundTripInTheirVersionTwoWireFormat) {
  const Challenge challenge =
      RoundTrip(Challenge{"ab12", true},
                {{"type", "challenge"}, {"version", 2}, {"nonce", "ab12"}, {"tls", true}});
  EXPECT_EQ(challenge.nonce, "ab12");
  EXPECT_TRUE(challenge.tls);
  EXPECT_EQ(challenge.version, 2);
  for (Role role : {Role::kAgent, Role::kClient}) {
    const Hello hello =
        RoundTrip(Hello{role, "mac"},
                  {{"type", "hello"}, {"version", 2}, {"role", RoleName(role)}, {"mac", "mac"}});
    EXPECT_EQ(hello.role, role);
    EXPECT_EQ(hello.mac, "mac");
  }
  // An older server's challenge: version 1, no TLS.
  const Result<Challenge> old =
      Challenge::FromJson({{"type", "challenge"}, {"version", 1}, {"nonce", "ab12"}});
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->version, 1);
  EXPECT_FALSE(old->tls);
  EXPECT_EQ(std::string(RoleName(Role::kAgent)), "agent");
  EXPECT_EQ(std::string(RoleName(Role::kClient)), "client");
  EXPECT_EQ(
      RoundTrip(Welcome{7.5}, {{"type", "welcome"}, {"version", 2}, {"heartbeat_timeout_s", 7.5}})
          .heartbeat_timeout_s,
      7.5);
}

TEST(AgentMessagesTest, RegisterAndHeartbeatRoundTripInTheirWireFormat) {
  const Register reg = RoundTrip(Register{"node-a", {"0", "3"}, 16, "10.0.0.2", {{9, {4, 1}}}},
                                 {{"type", "register"},
                                  {"name", "node-a"},
                                  {"gpus", {"0", "3"}},
                                  {"cpus", 16},
                                  {"address", "10.0.0.2"},
                                  {"running", {{{"run", 9}, {"trial", 4}, {"rank", 1}}}}});
  EXPECT_EQ(reg.name, "node-a");
  EXPECT_EQ(reg.gpus, (std::vector<std::string>{"0", "3"}));
  EXPECT_EQ(reg.cpus, 16);
  EXPECT_EQ(reg.address, "10.0.0.2");
  EXPECT_EQ(reg.running, (std::vector<RankRef>{{9, {4, 1}}}));
  EXPECT_EQ(reg.gpu_memory_mb, 0) << "left out of the frame when not known";
  EXPECT_EQ(RoundTrip(Register{"node-b", {"0"}, 8, "", {}, 81920}, {{"type", "register"},
                                                                    {"name", "node-b"},
                                                                    {"gpus", {"0"}},
                                                                    {"cpus", 8},
                                                                    {"address", ""},
                                                                    {"running", Json::array()},
                                                                    {"gpu_memory_mb", 81920}})
                .gpu_memory_mb,
            81920);
  EXPECT_EQ(RoundTrip(Heartbeat{7}, {{"type", "heartbeat"}, {"seq", 7}}).seq, 7);
}

TEST(AgentMessagesTest, LaunchAndKillRoundTripInTheirWireFormat) {
  const Launch launch =
      RoundTrip(Launch{{3, {4, 1}}, "python train.py", "/tmp/w", {"A=1", "B=2"}, {}},
                {{"type", "launch"},
                 {"run", 3},
                 {"trial", 4},
                 {"rank", 1},
                 {"command", "python train.py"},
                 {"workdir", "/tmp/w"},
                 {"env", {"A=1", "B=2"}}});
  EXPECT_EQ(launch.ref, (RankRef{3, {4, 1}}));
  EXPECT_EQ(launch.command, "python train.py");
  EXPECT_EQ(launch.workdir, "/tmp/w");
  EXPECT_EQ(launch.env, (std::vector<std::string>{"A=1", "B=2"}));
  EXPECT_TRUE(launch.warm_argv.empty()) << "left out of the frame when empty";
  const Launch warm = RoundTrip(
      Launch{{3, {4, 0}}, "hyperpack-trainer --lr 1", "", {}, {"hyperpack-trainer", "--lr", "1"}},
      {{"type", "launch"},
       {"run", 3},
       {"trial", 4},
       {"rank", 0},
       {"command", "hyperpack-trainer --lr 1"},
       {"workdir", ""},
       {"env", Json::array()},
       {"warm_argv", {"hyperpack-trainer", "--lr", "1"}}});
  EXPECT_EQ(warm.warm_argv, (std::vector<std::string>{"hyperpack-trainer", "--lr", "1"}));
  EXPECT_TRUE(warm.lock.empty()) << "left out of the frame when empty";
  const Launch locked =
      RoundTrip(Launch{{3, {4, 1}}, "train", "", {}, {}, "logs/s/trial-0002/rank-1.lock"},
                {{"type", "launch"},
                 {"run", 3},
                 {"trial", 4},
                 {"rank", 1},
                 {"command", "train"},
                 {"workdir", ""},
                 {"env", Json::array()},
                 {"lock", "logs/s/trial-0002/rank-1.lock"}});
  EXPECT_EQ(locked.lock, "logs/s/trial-0002/rank-1.lock");

  const Kill kill =
      RoundTrip(Kill{{3, {4, 0}}, 15},
                {{"type", "kill"}, {"run", 3}, {"trial", 4}, {"rank", 0}, {"signal", 15}});
  EXPECT_EQ(kill.ref, (RankRef{3, {4, 0}}));
  EXPECT_EQ(kill.signal, 15);
}

TEST(AgentMessagesTest, LinesOfBothStreamsRoundTripInTheirWireFormat) {
  for (auto [stream, name] : {std::pair{Stream::kOut, "out"}, std::pair{Stream::kErr, "err"}}) {
    const Line line = RoundTrip(Line{{5, {2, 3}}, stream, "loss=0.5"}, {{"type", "line"},
                                                                        {"run", 5},
                                                                        {"trial", 2},
                                                                        {"rank", 3},
                                                                        {"stream", name},
                                                                        {"text", "loss=0.5"}});
    EXPECT_EQ(line.ref, (RankRef{5, {2, 3}}));
    EXPECT_EQ(line.stream, stream);
    EXPECT_EQ(line.text, "loss=0.5");
  }
}

TEST(AgentMessagesTest, EveryKindOfExitRoundTripsInItsWireFormat) {
  const std::pair<RankExit, const char*> exits[] = {{RankExit::Exited(3), "exited"},
                                                    {RankExit::Signaled(9), "signaled"},
                                                    {RankExit::Lost(), "lost"},
                                                    {RankExit::NeverStarted(), "never_started"}};
  for (const auto& [exit, how] : exits) {
    const Exit back = RoundTrip(Exit{{1, {7, 0}}, exit}, {{"type", "exit"},
                                                          {"run", 1},
                                                          {"trial", 7},
                                                          {"rank", 0},
                                                          {"how", how},
                                                          {"code", exit.code}});
    EXPECT_EQ(back.ref, (RankRef{1, {7, 0}}));
    EXPECT_EQ(back.exit.kind, exit.kind) << how;
    EXPECT_EQ(back.exit.code, exit.code) << how;
  }
}

TEST(ClientMessagesTest, SubmitRoundTripsWithAndWithoutItsLimits) {
  const Submit full =
      RoundTrip(Submit{"name: s\n", "s.yaml", 10, 2, 12}, {{"type", "submit"},
                                                           {"study_text", "name: s\n"},
                                                           {"study_path", "s.yaml"},
                                                           {"max_trials", 10},
                                                           {"max_parallel", 2},
                                                           {"submission", 12}});
  EXPECT_EQ(full.submission, 12);
  EXPECT_EQ(full.study_text, "name: s\n");
  EXPECT_EQ(full.study_path, "s.yaml");
  EXPECT_EQ(full.max_trials, 10);
  EXPECT_EQ(full.max_parallel, 2);

  const Submit bare =
      RoundTrip(Submit{"x", "s.yaml", std::nullopt, std::nullopt, std::nullopt},
                {{"type", "submit"}, {"study_text", "x"}, {"study_path", "s.yaml"}});
  EXPECT_FALSE(bare.max_trials.has_value());
  EXPECT_FALSE(bare.max_parallel.has_value());
  EXPECT_FALSE(bare.submission.has_value());
}

TEST(ClientMessagesTest, AcceptedAndCancelRoundTripInTheirWireFormat) {
  EXPECT_EQ(RoundTrip(Accepted{41}, {{"type", "accepted"}, {"submission", 41}}).submission, 41);
  RoundTrip(Cancel{}, {{"type", "cancel"}});
}

// A trial's output is bytes: invalid UTF-8 goes out replaced, never as an exception from a send.
TEST(ClientMessagesTest, RequestAndReplyRoundTripInTheirWireFormat) {
  const Request request =
      RoundTrip(Request{RequestOp::kTell, "s", Json{{"trial", 3}}},
                {{"type", "request"}, {"op", "tell"}, {"study", "s"}, {"body", {{"trial", 3}}}});
  EXPECT_EQ(request.op, RequestOp::kTell);
  EXPECT_EQ(request.body, (Json{{"trial", 3}}));
  const Reply reply =
      RoundTrip(Reply{5, "no study named 's'", Json::object()}, {{"type", "reply"},
                                                                 {"code", 5},
                                                                 {"message", "no study named 's'"},
                                                                 {"body", Json::object()}});
  EXPECT_EQ(reply.code, 5);
  EXPECT_EQ(Ok(Reply::FromJson({{"type", "reply"}})).body, Json::object());
  auto unknown = Request::FromJson({{"type", "request"}, {"op", "own"}, {"study", "s"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("request: unknown op 'own'; expected one of"));
  auto list = Request::FromJson({{"type", "request"}, {"op", "ask"}, {"study", "s"}, {"body", 1}});
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr("request: body is not an object"));
}

TEST(FramesTest, TextThatIsNotUtf8IsEncodedWithReplacementCharacters) {
  const std::string bytes = "loss=\xff\xfe 0.5 \xc3";
  const std::string frame = Ok(EncodeFrame(Line{{1, {0, 0}}, Stream::kOut, bytes}.ToJson()));
  const Line back = Ok(Line::FromJson(Ok(ParseFrame(std::string_view(frame).substr(4)))));
  EXPECT_EQ(back.text, "loss=\xef\xbf\xbd\xef\xbf\xbd 0.5 \xef\xbf\xbd");
  const uint32_t n = (uint8_t(frame[0]) << 24) | (uint8_t(frame[1]) << 16) |
                     (uint8_t(frame[2]) << 8) | uint8_t(frame[3]);
  EXPECT_EQ(n, frame.size() - 4);
}

// Found by the frame fuzzer: a float, or an integer out of range, read as an int was undefined
// behaviour or a silent wrap.
TEST(FramesTest, NumbersThatAreNotWholeOrOutOfRangeAreRefusedNotConverted) {
  EXPECT_THAT(ErrorOf(Kill::FromJson, Ok(ParseFrame(R"({"type": "kill", "trial": 1e30, "rank": 0,
                                                        "signal": 9})"))),
              HasSubstr("'trial' is not a whole number in range"));
  EXPECT_THAT(ErrorOf(Kill::FromJson, Ok(ParseFrame(R"({"type": "kill", "trial": 1.5, "rank": 0,
                                                        "signal": 9})"))),
              HasSubstr("'trial' is not a whole number in range"));
  EXPECT_THAT(ErrorOf(Hello::FromJson, Ok(ParseFrame(R"({"type": "hello", "version": 4294967297,
                                                         "role": "agent", "mac": "x"})"))),
              HasSubstr("'version' is not a whole number in range"));
  EXPECT_EQ(
      Ok(Kill::FromJson(Ok(ParseFrame(R"({"type": "kill", "trial": 3, "rank": 0, "signal": 9})"))))
          .ref.id.trial,
      3);
}

TEST(FramesTest, AFrameOverTheLimitIsRefusedWhenEncodedAndWhenDecoded) {
  const Json big = Progress{std::string(2000, 'x')}.ToJson();
  EXPECT_THAT(ErrorOf([](const Json& m) { return EncodeFrame(m, 1000); }, big),
              HasSubstr("bytes is over the limit of 1000"));
  EXPECT_TRUE(EncodeFrame(big, 4000).ok());
  for (const char* body : {"", "{", "[1]", "{\"type\": 3}", "\xff", "{\"no\": \"type\"}"}) {
    const Result<Json> parsed = ParseFrame(body);
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_THAT(parsed.status().message(), HasSubstr("malformed frame")) << body;
  }
}

TEST(ClientMessagesTest, ProgressAndDoneRoundTripInTheirWireFormat) {
  EXPECT_EQ(
      RoundTrip(Progress{"trial 3 done"}, {{"type", "progress"}, {"text", "trial 3 done"}}).text,
      "trial 3 done");
  const Done done =
      RoundTrip(Done{2, "study.yaml:1:1: bad"},
                {{"type", "done"}, {"exit_code", 2}, {"message", "study.yaml:1:1: bad"}});
  EXPECT_EQ(done.exit_code, 2);
  EXPECT_EQ(done.message, "study.yaml:1:1: bad");
}

TEST(MessagesTest, OptionalFieldsReadAsTheirDefaultsWhenAbsent) {
  EXPECT_EQ(Ok(Register::FromJson(
                   {{"type", "register"}, {"name", "n"}, {"gpus", Json::array()}, {"cpus", 1}}))
                .address,
            "");
  EXPECT_EQ(Ok(Launch::FromJson({{"type", "launch"},
                                 {"trial", 0},
                                 {"rank", 0},
                                 {"command", "c"},
                                 {"env", Json::array()}}))
                .workdir,
            "");
  EXPECT_EQ(Ok(Submit::FromJson({{"type", "submit"}, {"study_text", "x"}})).study_path,
            "study.yaml");
  EXPECT_EQ(Ok(Progress::FromJson({{"type", "progress"}})).text, "");
  const Done done = Ok(Done::FromJson({{"type", "done"}}));
  EXPECT_EQ(done.exit_code, 1);
  EXPECT_EQ(done.message, "");
}

TEST(MessagesTest, AMissingFieldIsAnErrorThatNamesTheFieldAndTheFrame) {
  EXPECT_THAT(ErrorOf(Launch::FromJson,
                      {{"type", "launch"}, {"trial", 1}, {"rank", 0}, {"env", Json::array()}}),
              HasSubstr("a 'launch' frame without 'command'"));
  EXPECT_THAT(ErrorOf(Kill::FromJson, {{"type", "kill"}, {"rank", 0}, {"signal", 9}}),
              HasSubstr("a 'kill' frame without 'trial'"));
  EXPECT_THAT(ErrorOf(Submit::FromJson, {{"type", "submit"}}),
              HasSubstr("a 'submit' frame without 'study_text'"));
  EXPECT_THAT(ErrorOf(Challenge::FromJson, {{"type", "challenge"}, {"version", 1}}),
              HasSubstr("a 'challenge' frame without 'nonce'"));
}

TEST(MessagesTest, AFieldOfTheWrongTypeIsAnErrorThatNamesTheFieldAndTheFrame) {
  EXPECT_THAT(
      ErrorOf(Kill::FromJson, {{"type", "kill"}, {"trial", 1}, {"rank", 0}, {"signal", "9"}}),
      HasSubstr("'signal' has the wrong type in a 'kill' frame"));
  EXPECT_THAT(ErrorOf(Register::FromJson,
                      {{"type", "register"}, {"name", "n"}, {"gpus", {0, 1}}, {"cpus", 1}}),
              HasSubstr("'gpus' has the wrong type in a 'register' frame"));
  // An optional field may be absent, but not of the wrong type.
  EXPECT_THAT(
      ErrorOf(Submit::FromJson, {{"type", "submit"}, {"study_text", "x"}, {"max_trials", "ten"}}),
      HasSubstr("'max_trials' has the wrong type in a 'submit' frame"));
  EXPECT_THAT(ErrorOf(Done::FromJson, {{"type", "done"}, {"exit_code", "0"}}),
              HasSubstr("'exit_code' has the wrong type in a 'done' frame"));
}

TEST(MessagesTest, AnUnknownNameInAnEnumeratedFieldIsAnErrorThatNamesIt) {
  EXPECT_THAT(
      ErrorOf(Line::FromJson,
              {{"type", "line"}, {"trial", 1}, {"rank", 0}, {"stream", "both"}, {"text", ""}}),
      HasSubstr("stream 'both'; expected one of out, err"));
  EXPECT_THAT(
      ErrorOf(Exit::FromJson,
              {{"type", "exit"}, {"trial", 1}, {"rank", 0}, {"how", "vanished"}, {"code", 0}}),
      HasSubstr("how 'vanished'; expected one of exited, signaled, lost, never_started"));
  EXPECT_THAT(
      ErrorOf(Hello::FromJson, {{"type", "hello"}, {"version", 2}, {"role", "admin"}, {"mac", ""}}),
      HasSubstr("unknown role 'admin'"));
}

TEST(MessagesTest, AHelloOfAnotherVersionIsRefusedBeforeItsOtherFieldsAreRead) {
  EXPECT_THAT(ErrorOf(Hello::FromJson, {{"type", "hello"}, {"version", 1}, {"role", "operator"}}),
              HasSubstr("protocol version 1 is not 2"));
  EXPECT_THAT(ErrorOf(Hello::FromJson, {{"type", "hello"}, {"role", "agent"}, {"mac", "m"}}),
              HasSubstr("protocol version 0 is not 2"));
}

// A frame with several faults is refused for the first one read, as a decoder that stops there
// would: the type, then the fields in the struct's order, then a running rank's.
TEST(MessagesTest, AFrameWithSeveralFaultsIsRefusedForTheFirst) {
  EXPECT_THAT(ErrorOf(Kill::FromJson, {{"type", "kill"}, {"rank", "0"}, {"signal", "9"}}),
              HasSubstr("a 'kill' frame without 'trial'"));
  EXPECT_THAT(ErrorOf(Launch::FromJson, {{"type", "kill"}}),
              HasSubstr("expected a 'launch' frame, not a 'kill' one"));
  EXPECT_THAT(ErrorOf(Register::FromJson, {{"type", "register"},
                                           {"name", "n"},
                                           {"gpus", Json::array()},
                                           {"cpus", 1},
                                           {"running", {{{"trial", 1}}, {{"rank", "x"}}}}}),
              HasSubstr("without 'rank'"));
}

TEST(MessagesTest, AFrameReadAsAnotherTypeIsAnErrorThatNamesBoth) {
  EXPECT_THAT(ErrorOf(Launch::FromJson, Kill{{1, 0}, 9}.ToJson()),
              HasSubstr("expected a 'launch' frame, not a 'kill' one"));
  EXPECT_THAT(ErrorOf(Done::FromJson, {{"type", "finished"}}),
              HasSubstr("unknown frame type 'finished'"));
}

TEST(HandshakeTest, AnAgentNeverWelcomedGivesUpOnARefusalAtOnceAndOnClosedHandshakesInARow) {
  EXPECT_TRUE(GivesUpBeforeAnyWelcome(StatusCode::kInvalidArgument, 0));
  EXPECT_FALSE(GivesUpBeforeAnyWelcome(StatusCode::kDeadlineExceeded, 0));
  EXPECT_FALSE(GivesUpBeforeAnyWelcome(StatusCode::kOk, 0));
  for (int n = 1; n < kClosedHandshakesToGiveUp; ++n)
    EXPECT_FALSE(GivesUpBeforeAnyWelcome(StatusCode::kUnavailable, n)) << n;
  EXPECT_TRUE(GivesUpBeforeAnyWelcome(StatusCode::kUnavailable, kClosedHandshakesToGiveUp));
  EXPECT_GE(kClosedHandshakesToGiveUp, 3) << "a restart or a stall closes more than once";
}

}  // namespace
}  // namespace hyperpack::scheduler::protocol
