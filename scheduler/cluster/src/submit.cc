// hyperpack run --server: submits a study to a server and prints its progress until it is done.
#include <boost/asio.hpp>
#include <iostream>

#include "hyperpack/scheduler/serve.h"
#include "net.h"
#include "protocol.h"

namespace hyperpack::scheduler {

namespace asio = boost::asio;
using protocol::Connection;
using protocol::Json;
using tcp = asio::ip::tcp;

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
          co_await protocol::ClientHandshake(*conn, options.token, "client");
          Json submit = {{"type", "submit"},
                         {"study_text", options.study_text},
                         {"study_path", options.study_path}};
          if (options.max_trials) submit["max_trials"] = *options.max_trials;
          if (options.max_parallel) submit["max_parallel"] = *options.max_parallel;
          conn->Send(submit);
          while (true) {
            Json m = co_await conn->Receive();
            if (m["type"] == "progress") {
              out << m.value("text", std::string()) << std::endl;
            } else if (m["type"] == "done") {
              std::string message = m.value("message", std::string());
              int code = m.value("exit_code", 1);
              if (!message.empty()) {
                result = code == 2 ? Status::Invalid(message) : Status::Io(message);
              } else {
                result = code;
              }
              conn->Close();
              co_return;
            }
          }
        } catch (const std::exception& e) {
          if (result.ok()) co_return;
          result = Status::Io(options.server, ": ", e.what());
        }
      },
      asio::detached);
  io.run();
  return result;
}

}  // namespace hyperpack::scheduler
