#include "net.h"

#include "hyperpack/text.h"

namespace hyperpack::scheduler {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

Result<std::pair<std::string, int>> SplitHostPort(const std::string& text) {
  auto colon = text.rfind(':');
  auto port = colon == std::string::npos ? std::nullopt : ParseInt(text.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535 || colon == 0)
    return Status::Invalid("'", text, "' is not HOST:PORT");
  return std::make_pair(text.substr(0, colon), static_cast<int>(*port));
}

Result<tcp::endpoint> Resolve(asio::io_context& io, const std::string& text) {
  HP_ASSIGN_OR_RETURN(auto hp, SplitHostPort(text));
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(hp.first, std::to_string(hp.second), ec);
  if (ec || results.empty())
    return Status::Invalid("cannot resolve '", hp.first, "': ", ec ? ec.message() : "no address");
  return results.begin()->endpoint();
}

}  // namespace hyperpack::scheduler
