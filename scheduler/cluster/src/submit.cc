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
  Follower(asio::io_context& io, const SubmitOptions& options, tcp::endpoint ep)
      : io_(io),
        options_(options),
        ep_(ep),
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
      if (!submission_) {         // never accepted: nothing to follow again
        result_ = Status::Io(options_.server, ": ", *lost);
        break;
      }
      if (failures++ % 10 == 0)
        out_ << "lost the server " << options_.server << " (" << *lost
             << "); reconnecting to follow submission " << *submission_ << std::endl;
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
      if (co_await Follow()) co_return std::nullopt;
      co_return "closed by the server";  // it is stopping
    } catch (const std::exception& e) {
      co_return protocol::ErrorText(e);
    }
  }

  // True once the done frame came; false when the server closed the connection first.
  asio::awaitable<bool> Follow() {
    tcp::socket socket(io_);
    co_await socket.async_connect(ep_, asio::use_awaitable);
    conn_ = std::make_shared<Connection>(std::move(socket));
    co_await protocol::ClientHandshake(*conn_, options_.token, protocol::Role::kClient);
    conn_->Send(protocol::Submit{options_.study_text, options_.study_path, options_.max_trials,
                                 options_.max_parallel, submission_}
                    .ToJson());
    if (cancelled_) conn_->Send(protocol::Cancel{}.ToJson());
    while (true) {
      const Json m = co_await conn_->Receive();
      switch (protocol::TypeOf(m)) {
        case FrameType::kAccepted:
          submission_ = protocol::Accepted::FromJson(m).submission;
          break;
        case FrameType::kProgress:
          out_ << protocol::Progress::FromJson(m).text << std::endl;
          break;
        case FrameType::kDone:
          result_ = ResultOf(protocol::Done::FromJson(m));
          co_return true;
        default:
          break;  // nothing else is meant for a client; ignored, as it always was
      }
    }
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
  tcp::endpoint ep_;
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
  HP_ASSIGN_OR_RETURN(tcp::endpoint ep, Resolve(io, options.server));
  return Follower(io, options, ep).Run();
}

}  // namespace hyperpack::scheduler
