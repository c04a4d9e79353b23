// Addresses for hyperpack serve, agent and submit: HOST:PORT (SplitHostPort, text.h) resolved.
// Thread-safety: pure, or on the io_context's thread given.
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "hyperpack/status.h"

namespace hyperpack::scheduler {

Result<boost::asio::ip::tcp::endpoint> Resolve(boost::asio::io_context& io,
                                               const std::string& text);

// A server and its standbys: "HOST:PORT,HOST:PORT,..." resolved in order, each with its text.
struct ServerAddress {
  boost::asio::ip::tcp::endpoint endpoint;
  std::string text;
  std::string host;  // as given: what a server's certificate must name
};
Result<std::vector<ServerAddress>> ResolveAll(boost::asio::io_context& io, const std::string& list);

// Reconnecting (agents, `run --server`): the delay doubles from the first to the largest, with
// jitter where the caller adds it.
constexpr double kFirstRetryS = 0.1;
constexpr double kMaxRetryS = 5.0;

// Seconds as the steady clock's duration, for timers and deadlines.
inline std::chrono::steady_clock::duration Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

}  // namespace hyperpack::scheduler
