// The accept loop of hyperpack's TCP servers (`hyperpack serve`, `hyperpack dashboard`).
// Thread-safety: runs on the acceptor's io_context, as a coroutine spawned there.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>
#include <utility>

namespace hyperpack::net {

// Accepts connections until `acceptor` is closed (closing it is how a server stops), handing each
// socket to `serve`, which starts its session (co_spawn) and returns at once. A connection that
// fails before it is accepted (a reset, too many open files) is skipped: one bad connection never
// stops the server.
inline boost::asio::awaitable<void> AcceptLoop(
    boost::asio::ip::tcp::acceptor& acceptor,
    std::function<void(boost::asio::ip::tcp::socket)> serve) {
  while (acceptor.is_open()) {
    boost::system::error_code ec;
    boost::asio::ip::tcp::socket socket =
        co_await acceptor.async_accept(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    if (ec) {
      if (!acceptor.is_open() || ec == boost::asio::error::operation_aborted) co_return;
      continue;
    }
    serve(std::move(socket));
  }
}

}  // namespace hyperpack::net
