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

Result<std::vector<ServerAddress>> ResolveAll(asio::io_context& io, const std::string& list) {
  std::vector<ServerAddress> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string text = list.substr(start, comma - start);
    text.erase(0, text.find_first_not_of(' '));
    text.erase(text.find_last_not_of(' ') + 1);
    if (text.empty()) return Status::Invalid("'", list, "': an empty address in the list");
    HP_ASSIGN_OR_RETURN(tcp::endpoint ep, Resolve(io, text));
    HP_ASSIGN_OR_RETURN(auto host_port, SplitHostPort(text));
    out.push_back({ep, text, host_port.first});
    start = comma + 1;
  }
  return out;
}

}  // namespace hyperpack::scheduler
