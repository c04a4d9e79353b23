#include "hyperpack/dashboard/dashboard.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <sstream>
#include <utility>

#include "hyperpack/net/accept.h"
#include "hyperpack/net/tls_files.h"
#include "hyperpack/report/report.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/text.h"
#include "routes.h"

namespace hyperpack::dashboard {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
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
std::string Printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 200)) out += c >= 0x20 && c < 0x7f ? c : '?';
  return out;
}

std::string LogLine(beast::string_view method, beast::string_view target, unsigned status) {
  const std::string path = Printable(target.substr(0, target.find('?')));
  return StrCat(std::string(method), " ", path.empty() ? "-" : path, " ", status);
}

// --listen's address: an IP address ("localhost" being 127.0.0.1), IPv6 in brackets or not.
Result<tcp::endpoint> ParseListen(const std::string& listen) {
  HP_ASSIGN_OR_RETURN(auto host_port, SplitHostPort(listen));
  std::string host = host_port.first == "localhost" ? "127.0.0.1" : host_port.first;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec)
    return Status::Invalid("--listen ", listen,
                           ": the address must be an IP address, e.g. 127.0.0.1:8080");
  return tcp::endpoint(address, static_cast<unsigned short>(host_port.second));
}

// Whether a read's error is the connection's end (closed, reset, timed out, broken TLS) rather
// than a request that could not be parsed, which is answered 400.
bool ConnectionEnded(const boost::system::error_code& ec) {
  return ec == http::error::end_of_stream ||
         ec.category() != http::make_error_code(http::error::end_of_stream).category();
}

class Server {
 public:
  explicit Server(const DashboardOptions& options)
      : options_(options), acceptor_(io_), signals_(io_, SIGINT, SIGTERM), pool_(kWorkers) {}

  Status Run() {
    HP_ASSIGN_OR_RETURN(const tcp::endpoint endpoint, ParseListen(options_.listen));
    HP_RETURN_IF_ERROR(SetUpTransport(endpoint.address()));
    boost::system::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Status::Unavailable("cannot listen on ", options_.listen, ": ", ec.message());
    const tcp::endpoint bound = acceptor_.local_endpoint();
    const std::string shown = bound.address().is_v6() ? "[" + bound.address().to_string() + "]"
                                                      : bound.address().to_string();
    url_ = StrCat(ssl_ ? "https://" : "http://", shown, ":", bound.port(), "/");
    if (options_.on_listening) options_.on_listening(url_);
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
  // HTTPS or HTTP, as ChooseTransport decides from the options; the certificate loaded.
  Status SetUpTransport(const asio::ip::address& address) {
    const DashboardOptions& o = options_;
    if (o.tls_cert_file.empty() != o.tls_key_file.empty())
      return Status::Invalid("HTTPS needs both --tls-cert and --tls-key");
    if (o.tls_cert_file.empty() && !o.tls_ca_file.empty())
      return Status::Invalid(
          "--tls-ca asks clients for certificates over HTTPS: give the "
          "server's own with --tls-cert and --tls-key");
    bool warn = false;
    HP_ASSIGN_OR_RETURN(const Transport transport,
                        ChooseTransport({o.listen, address.is_loopback(), !o.token.empty(),
                                         !o.tls_cert_file.empty(), o.insecure},
                                        &warn));
    if (warn && o.log)
      o.log(StrCat("warning: plain HTTP beyond loopback (--insecure) on ", o.listen,
                   ": anyone on the network's path can read the token and every page"));
    if (transport == Transport::kHttp) return Status::Ok();
    ssl_ = std::make_unique<ssl::context>(ssl::context::tls_server);
    net::RequireTls13(*ssl_);
    return net::LoadCertificates(*ssl_,
                                 {o.tls_ca_file, o.tls_cert_file, o.tls_key_file, o.tls_crl_file});
  }

  asio::awaitable<void> Accept() {
    return net::AcceptLoop(acceptor_, [this](tcp::socket socket) {
      asio::co_spawn(io_, Session(std::move(socket)), asio::detached);
    });
  }

  // One connection. Over HTTPS: what it opens with decides; TLS is shaken hands with, anything
  // else is read as HTTP and answered 400.
  asio::awaitable<void> Session(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer(8192);
    bool moved = false;
    try {
      if (!ssl_) {
        co_await Requests(stream, buffer);
      } else {
        stream.expires_after(kRequestTimeout);
        const bool tls = co_await beast::async_detect_ssl(stream, buffer, asio::use_awaitable);
        if (!tls) {
          co_await RefusePlain(stream, buffer);
        } else {
          moved = true;  // to the TLS stream, which closes it
          co_await Secure(std::move(stream), buffer);
        }
      }
    } catch (const std::exception&) {
      // A broken connection's last word: nothing to answer, and nothing else is affected.
    }
    boost::system::error_code ignored;
    if (!moved) stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  asio::awaitable<void> Secure(beast::tcp_stream stream, beast::flat_buffer& buffer) {
    beast::ssl_stream<beast::tcp_stream> secure(std::move(stream), *ssl_);
    boost::system::error_code ec;
    const size_t used = co_await secure.async_handshake(
        ssl::stream_base::server, buffer.data(), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (options_.log) options_.log(HandshakeRefused(secure, ec));
      co_return;
    }
    buffer.consume(used);
    co_await Requests(secure, buffer);
    beast::get_lowest_layer(secure).expires_after(std::chrono::seconds(5));
    co_await secure.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
  }

  // "- TLS handshake refused from 10.0.0.7: certificate verify failed (certificate revoked)".
  static std::string HandshakeRefused(beast::ssl_stream<beast::tcp_stream>& secure,
                                      const boost::system::error_code& ec) {
    boost::system::error_code ignored;
    const auto peer = beast::get_lowest_layer(secure).socket().remote_endpoint(ignored);
    std::string line = StrCat("- TLS handshake refused from ", peer.address().to_string(), ": ",
                              Printable(ec.message()));
    const long verify = SSL_get_verify_result(secure.native_handle());
    if (verify != X509_V_OK) line += StrCat(" (", X509_verify_cert_error_string(verify), ")");
    return line;
  }

  // A plain HTTP request on the HTTPS port: its header read (so that the answer is not lost to a
  // reset), and 400 with where to go instead. Nothing it asked for is served.
  asio::awaitable<void> RefusePlain(beast::tcp_stream& stream, beast::flat_buffer& buffer) {
    http::request_parser<http::empty_body> parser;
    parser.header_limit(kHeaderLimit);
    boost::system::error_code ec;
    co_await http::async_read_header(stream, buffer, parser,
                                     asio::redirect_error(asio::use_awaitable, ec));
    // The address the client dialled, rather than the listening one (0.0.0.0 is no address).
    const auto host = parser.get()[http::field::host];
    const std::string where = ec || host.empty() ? url_ : "https://" + Printable(host) + "/";
    Response res = Text(http::status::bad_request, "this dashboard serves HTTPS only: " + where +
                                                       " (nothing was sent over HTTP)");
    res.keep_alive(false);
    res.prepare_payload();
    if (options_.log)
      options_.log(LogLine(ec ? "-" : parser.get().method_string(), ec ? "" : parser.get().target(),
                           res.result_int()) +
                   " (plain HTTP on the HTTPS port: refused)");
    co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
  }

  // Requests in turn (keep-alive), each bounded in size and time.
  template <class Stream>
  asio::awaitable<void> Requests(Stream& stream, beast::flat_buffer& buffer) {
    for (;;) {
      http::request_parser<http::empty_body> parser;
      parser.header_limit(kHeaderLimit);
      parser.body_limit(0);
      beast::get_lowest_layer(stream).expires_after(kRequestTimeout);
      boost::system::error_code ec;
      co_await http::async_read(stream, buffer, parser,
                                asio::redirect_error(asio::use_awaitable, ec));
      if (ec && ConnectionEnded(ec)) break;
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
  std::unique_ptr<ssl::context> ssl_;  // null: plain HTTP
  std::string url_;
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
