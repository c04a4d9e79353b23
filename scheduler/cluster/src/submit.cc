// hyperpack run --server: submits a study to a server and prints its progress until it is done.
// Once the server has accepted the study, a lost connection is retried with backoff and the
// submission followed again by its id, so a server restarted meanwhile is followed to the end.
// Ctrl-C asks the server to stop the study (a second one leaves at once).
#include <signal.h>

#include <boost/asio.hpp>
#include <iostream>
#include <random>

#include "hyperpack/scheduler/serve.h"
#include "net.h"
#include "protocol.h"

namespace hyperpack::scheduler {

namespace asio = boost::asio;
using protocol::Connection;
using protocol::FrameType;
using protocol::Json;
using tcp = asio::ip::tcp;

namespace {

// The study's result as the done frame gives it: its exit code, or an error when it could not run
// (2: bad input).
Result<int> ResultOf(const protocol::Done& done) {
  if (done.message.empty()) return done.exit_code;
  if (done.exit_code == 2) return Status::Invalid(done.message);
  if (done.exit_code == 130) return 130;
  return Status::Io(done.message);
}

class Follower {
 public:
  Follower(asio::io_context& io, const SubmitOptions& options, std::vector<ServerAddress> servers,
           std::shared_ptr<tls::TlsContext> tls)
      : io_(io),
        options_(options),
        servers_(std::move(servers)),
        tls_(std::move(tls)),
        out_(options.out ? *options.out : std::cout),
        signals_(io, SIGINT, SIGTERM),
        retry_(io),
        jitter_(std::random_device{}()) {}

  Result<int> Run() {
    WaitSignal();
    asio::co_spawn(io_, Main(), asio::detached);
    io_.run();
    return result_;
  }

 private:
  asio::awaitable<void> Main() {
    double delay = kFirstRetryS;
    int failures = 0;
    while (!left_) {
      const std::optional<std::string> lost = co_await FollowOnce();
      if (!lost || left_) break;  // done, or the user left
      if (!submission_) {         // never accepted: the next address, or nothing to follow again
        if (++unanswered_ < servers_.size()) {
          next_ = (next_ + 1) % servers_.size();
          continue;
        }
        result_ = Status::Io(options_.server, ": ", *lost);
        break;
      }
      if (failures++ % 10 == 0)
        out_ << "lost the server " << servers_[next_].text << " (" << *lost
             << "); reconnecting to follow submission " << *submission_ << std::endl;
      next_ = (next_ + 1) % servers_.size();  // a standby that took over
      if (conn_) conn_->Close();
      const double wait = delay * std::uniform_real_distribution<double>(0.5, 1.5)(jitter_);
      delay = std::min(delay * 2, kMaxRetryS);
      retry_.expires_after(std::chrono::duration_cast<asio::steady_timer::duration>(
          std::chrono::duration<double>(wait)));
      boost::system::error_code ec;
      co_await retry_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    signals_.cancel();
    retry_.cancel();
    if (conn_) conn_->Close();
  }

  // One connection: submits (or follows again) and prints progress until the study is done
  // (nullopt) or the connection is lost (why).
  asio::awaitable<std::optional<std::string>> FollowOnce() {
    try {
      const Status followed = co_await Follow();
      if (followed.ok()) co_return std::nullopt;
      co_return followed.message();
    } catch (const std::exception& e) {  // the connect's system errors
      co_return protocol::ErrorText(e);
    }
  }

  // OK once the done frame came; else why the connection ended first. Throws only the connect's
  // system errors.
  asio::awaitable<Status> Follow() {
    tcp::socket socket(io_);
    co_await socket.async_connect(servers_[next_].endpoint, asio::use_awaitable);
    conn_ = std::make_shared<Connection>(std::move(socket));
    Result<protocol::Welcome> welcome = co_await protocol::ClientHandshake(
        *conn_, *tls_, servers_[next_].host, options_.credentials.token, protocol::Role::kClient);
    if (!welcome.ok()) co_return welcome.status();
    conn_->Send(protocol::Submit{options_.study_text, options_.study_path, options_.max_trials,
                                 options_.max_parallel, submission_}
                    .ToJson());
    if (cancelled_) conn_->Send(protocol::Cancel{}.ToJson());
    while (true) {
      Result<Json> m = co_await conn_->Receive();
      if (!m.ok()) co_return m.status();
      Result<bool> done = FromServer(*m);
      if (!done.ok()) co_return done.status();
      if (*done) co_return Status::Ok();
    }
  }

  // A frame from the server: the submission's id, a line of progress, or the end (true; result_
  // set).
  Result<bool> FromServer(const Json& m) {
    HP_ASSIGN_OR_RETURN(const FrameType type, protocol::TypeOf(m));
    switch (type) {
      case FrameType::kAccepted: {
        HP_ASSIGN_OR_RETURN(const protocol::Accepted accepted, protocol::Accepted::FromJson(m));
        submission_ = accepted.submission;
        break;
      }
      case FrameType::kProgress: {
        HP_ASSIGN_OR_RETURN(const protocol::Progress progress, protocol::Progress::FromJson(m));
        out_ << progress.text << std::endl;
        break;
      }
      case FrameType::kDone: {
        HP_ASSIGN_OR_RETURN(const protocol::Done done, protocol::Done::FromJson(m));
        result_ = ResultOf(done);
        return true;
      }
      default:
        break;  // nothing else is meant for a client; ignored, as it always was
    }
    return false;
  }

  void WaitSignal() {
    signals_.async_wait([this](boost::system::error_code ec, int) {
      if (ec) return;
      if (cancelled_ || !submission_) {  // the second, or nothing to cancel yet: leave now
        left_ = true;
        result_ = 130;
        io_.stop();
        return;
      }
      cancelled_ = true;
      out_ << "\nstopping the study on the server (Ctrl-C again to leave at once)" << std::endl;
      if (conn_ && conn_->open()) conn_->Send(protocol::Cancel{}.ToJson());
      WaitSignal();
    });
  }

  asio::io_context& io_;
  const SubmitOptions& options_;
  std::vector<ServerAddress> servers_;  // --server's, in order
  std::shared_ptr<tls::TlsContext> tls_;
  size_t next_ = 0;        // the one to connect to next
  size_t unanswered_ = 0;  // addresses tried before any accepted the study
  std::ostream& out_;
  asio::signal_set signals_;
  asio::steady_timer retry_;
  std::mt19937_64 jitter_;
  std::shared_ptr<Connection> conn_;
  std::optional<int64_t> submission_;
  Result<int> result_ = Status::Io("the server closed the connection before the study was done");
  bool cancelled_ = false;
  bool left_ = false;
};

}  // namespace

Result<int> SubmitStudy(const SubmitOptions& options) {
  asio::io_context io;
  HP_ASSIGN_OR_RETURN(std::vector<ServerAddress> servers, ResolveAll(io, options.server));
  HP_ASSIGN_OR_RETURN(auto tls, tls::TlsContext::Make(options.credentials, tls::End::kClient));
  return Follower(io, options, std::move(servers), std::move(tls)).Run();
}

}  // namespace hyperpack::scheduler
