// hyperpack run --server: submits a study to a server and prints its progress until it is done.
#include <boost/asio.hpp>
#include <iostream>

#include "hyperpack/scheduler/serve.h"
#include "net.h"
#include "protocol.h"

namespace hyperpack::scheduler {

namespace asio = boost::asio;
using protocol::Connection;
using protocol::FrameType;
using protocol::Json;
using tcp = asio::ip::tcp;

namespace {

// The study's result as the done frame gives it: its exit code, or an error when it could not run
// (2: bad input).
Result<int> ResultOf(const protocol::Done& done) {
  if (done.message.empty()) return done.exit_code;
  if (done.exit_code == 2) return Status::Invalid(done.message);
  return Status::Io(done.message);
}

// Sends the study and follows its progress until the done frame, which it returns.
asio::awaitable<protocol::Done> Follow(Connection& conn, const SubmitOptions& options,
                                       std::ostream& out) {
  co_await protocol::ClientHandshake(conn, options.token, protocol::Role::kClient);
  conn.Send(protocol::Submit{options.study_text, options.study_path, options.max_trials,
                             options.max_parallel}
                .ToJson());
  while (true) {
    const Json m = co_await conn.Receive();
    switch (protocol::TypeOf(m)) {
      case FrameType::kProgress:
        out << protocol::Progress::FromJson(m).text << std::endl;
        break;
      case FrameType::kDone:
        co_return protocol::Done::FromJson(m);
      default:
        break;  // nothing else is meant for a client; ignored, as it always was
    }
  }
}

}  // namespace

Result<int> SubmitStudy(const SubmitOptions& options) {
  asio::io_context io;
  HP_ASSIGN_OR_RETURN(tcp::endpoint ep, Resolve(io, options.server));
  tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect(ep, ec);
  if (ec) return Status::Io("cannot connect to ", options.server, ": ", ec.message());
  auto conn = std::make_shared<Connection>(std::move(socket));
  std::ostream& out = options.out ? *options.out : std::cout;
  Result<int> result = Status::Io("the server closed the connection before the study was done");
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        try {
          result = ResultOf(co_await Follow(*conn, options, out));
          conn->Close();
        } catch (const std::exception& e) {
          result = Status::Io(options.server, ": ", e.what());
        }
      },
      asio::detached);
  io.run();
  return result;
}

}  // namespace hyperpack::scheduler
