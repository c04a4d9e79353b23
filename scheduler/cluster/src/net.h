// Addresses for hyperpack serve, agent and submit: HOST:PORT parsed and resolved.
// Thread-safety: pure, or on the io_context's thread given.
#pragma once

#include <boost/asio.hpp>
#include <string>
#include <utility>

#include "hyperpack/status.h"

namespace hyperpack::scheduler {

Result<std::pair<std::string, int>> SplitHostPort(const std::string& text);
Result<boost::asio::ip::tcp::endpoint> Resolve(boost::asio::io_context& io,
                                               const std::string& text);

}  // namespace hyperpack::scheduler
