#include "net.h"

#include "hyperpack/text.h"

namespace hyperpack::scheduler {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

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
