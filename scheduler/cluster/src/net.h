// Addresses for hyperpack serve, agent and submit: HOST:PORT (SplitHostPort, text.h) resolved.
// Thread-safety: pure, or on the io_context's thread given.
#pragma once

#include <boost/asio.hpp>
#include <string>
#include <utility>

#include "hyperpack/status.h"

namespace hyperpack::scheduler {

Result<boost::asio::ip::tcp::endpoint> Resolve(boost::asio::io_context& io,
                                               const std::string& text);

}  // namespace hyperpack::scheduler
