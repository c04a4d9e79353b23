#include "hyperpack/dashboard/dashboard.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <sstream>
#include <utility>

#include "hyperpack/net/accept.h"
#include "hyperpack/report/report.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/text.h"
#include "routes.h"

namespace hyperpack::dashboard {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr size_t kHeaderLimit = 16 * 1024;
constexpr auto kRequestTimeout = std::chrono::seconds(30);
constexpr int kWorkers = 2;

using Response = http::response<http::string_body>;

Response Reply(http::status status, std::string body, const char* type) {
  Response res(status, 11);
  res.set(http::field::content_type, type);
  res.set(http::field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  res.set(http::field::server, "hyperpack-dashboard");
  res.body() = std::move(body);
  return res;
}

Response Text(http::status status, const std::string& text) {
  return Reply(status, text + "\n", "text/plain; charset=utf-8");
}

http::status StatusFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kNotFound:
      return http::status::not_found;
    case StatusCode::kInvalidArgument:
      return http::status::bad_request;
    default:
      return http::status::internal_server_error;
  }
}

// "GET /study/x 200": the path without its query (it may hold the token), printable ASCII only,
// at most 200 characters of it.
std::string LogLine(beast::string_view method, beast::string_view target, unsigned status) {
  std::string path;
  for (char c : target.substr(0, target.find('?')).substr(0, 200))
    path += c >= 0x20 && c < 0x7f ? c : '?';
  return StrCat(std::string(method), " ", path.empty() ? "-" : path, " ", status);
}

class Server {
 public:
  explicit Server(const DashboardOptions& options)
      : options_(options), acceptor_(io_), signals_(io_, SIGINT, SIGTERM), pool_(kWorkers) {}

  Status Run() {
    HP_ASSIGN_OR_RETURN(auto host_port, SplitHostPort(options_.listen));
    boost::system::error_code ec;
    std::string host = host_port.first == "localhost" ? "127.0.0.1" : host_port.first;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    const asio::ip::address address = asio::ip::make_address(host, ec);
    if (ec)
      return Status::Invalid("--listen ", options_.listen,
                             ": the address must be an IP address, e.g. 127.0.0.1:8080");
    if (!address.is_loopback() && options_.token.empty())
      return Status::Invalid("--listen ", options_.listen,
                             " is beyond loopback: give --token-file FILE, and the dashboard asks "
                             "every request for that token");
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(host_port.second));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Status::Unavailable("cannot listen on ", options_.listen, ": ", ec.message());
    const tcp::endpoint bound = acceptor_.local_endpoint();
    const std::string shown = bound.address().is_v6() ? "[" + bound.address().to_string() + "]"
                                                      : bound.address().to_string();
    if (options_.on_listening)
      options_.on_listening(StrCat("http://", shown, ":", bound.port(), "/"));
    signals_.async_wait([this](boost::system::error_code, int) {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      io_.stop();
    });
    asio::co_spawn(io_, Accept(), asio::detached);
    io_.run();
    pool_.join();
    return Status::Ok();
  }

 private:
  asio::awaitable<void> Accept() {
    return net::AcceptLoop(acceptor_, [this](tcp::socket socket) {
      asio::co_spawn(io_, Session(std::move(socket)), asio::detached);
    });
  }

  // One connection: requests in turn (keep-alive), each bounded in size and time.
  asio::awaitable<void> Session(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer(8192);
    try {
      for (;;) {
        http::request_parser<http::empty_body> parser;
        parser.header_limit(kHeaderLimit);
        parser.body_limit(0);
        stream.expires_after(kRequestTimeout);
        boost::system::error_code ec;
        co_await http::async_read(stream, buffer, parser,
                                  asio::redirect_error(asio::use_awaitable, ec));
        if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
            ec == asio::error::operation_aborted || ec == asio::error::connection_reset)
          break;
        // Not one conditional expression: GCC 12 mishandles a co_await inside one.
        Response res;
        if (ec) {
          res = Text(http::status::bad_request, "malformed request: " + ec.message());
        } else {
          res = co_await Handle(parser.get());
        }
        const bool keep = !ec && parser.get().keep_alive();
        res.keep_alive(keep);
        if (!ec && parser.get().method() == http::verb::head) res.body().clear();
        res.prepare_payload();
        if (options_.log)
          options_.log(LogLine(ec ? "-" : parser.get().method_string(),
                               ec ? "" : parser.get().target(), res.result_int()));
        co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !keep) break;
      }
    } catch (const std::exception&) {
      // A broken connection's last word: nothing to answer, and nothing else is affected.
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  asio::awaitable<Response> Handle(const http::request<http::empty_body>& req) {
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      Response res = Text(http::status::method_not_allowed, "the dashboard only reads: GET");
      res.set(http::field::allow, "GET, HEAD");
      co_return res;
    }
    const Route route = ParseTarget(std::string_view(req.target().data(), req.target().size()));
    const auto auth = req[http::field::authorization];
    if (!Authorized(options_.token, std::string_view(auth.data(), auth.size()), route.token)) {
      Response res = Text(http::status::unauthorized,
                          "this dashboard asks for its token: add ?token=TOKEN to the address, or "
                          "send Authorization: Bearer TOKEN");
      res.set(http::field::www_authenticate, "Bearer");
      co_return res;
    }
    switch (route.kind) {
      case RouteKind::kNotFound:
        co_return Text(http::status::not_found, "no such page: try /");
      case RouteKind::kBadRequest:
        co_return Text(http::status::bad_request, "malformed study name in the address");
      default:
        break;
    }
    // Storage and the pages are made on the pool, off this thread; the result comes back here.
    Response res = co_await asio::co_spawn(pool_, Work(route), asio::use_awaitable);
    co_return res;
  }

  asio::awaitable<Response> Work(Route route) {
    try {
      co_return Answer(route);
    } catch (const std::exception& e) {
      co_return Text(http::status::internal_server_error,
                     std::string("internal error: ") + e.what());
    }
  }

  Response Answer(const Route& route) {
    storage::Storage::Options o;
    o.read_only = true;
    auto db = storage::Storage::Open(options_.storage_path, o);
    if (!db.ok() && route.kind == RouteKind::kIndex && db.status().code() == StatusCode::kNotFound)
      return Reply(http::status::ok, IndexHtml("[]", route.token), "text/html; charset=utf-8");
    if (!db.ok()) return Text(StatusFor(db.status()), db.status().message());
    const std::string query = route.token.empty() ? "" : "?token=" + UrlEncode(route.token);
    switch (route.kind) {
      case RouteKind::kIndex:
      case RouteKind::kStudiesJson: {
        std::ostringstream json;
        Status s = report::ReportStudies(**db, report::OutputFormat::kJson, json);
        if (!s.ok()) return Text(StatusFor(s), s.message());
        if (route.kind == RouteKind::kStudiesJson)
          return Reply(http::status::ok, json.str(), "application/json");
        return Reply(http::status::ok, IndexHtml(json.str(), route.token),
                     "text/html; charset=utf-8");
      }
      case RouteKind::kStudyPage: {
        auto page = report::StudyPage(**db, route.study,
                                      "/api/study/" + UrlEncode(route.study) + query, cache_);
        if (!page.ok()) return Text(StatusFor(page.status()), page.status().message());
        return Reply(http::status::ok, *std::move(page), "text/html; charset=utf-8");
      }
      case RouteKind::kStudyJson: {
        auto json = report::StudyPageJson(**db, route.study, cache_);
        if (!json.ok()) return Text(StatusFor(json.status()), json.status().message());
        return Reply(http::status::ok, *std::move(json), "application/json");
      }
      default:
        return Text(http::status::not_found, "no such page: try /");
    }
  }

  const DashboardOptions& options_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::signal_set signals_;
  asio::thread_pool pool_;
  report::PageCache cache_;
};

}  // namespace

Status RunDashboard(const DashboardOptions& options) {
  try {
    Server server(options);
    return server.Run();
  } catch (const std::exception& e) {
    return Status::Io("the dashboard stopped: ", e.what());
  }
}

}  // namespace hyperpack::dashboard
