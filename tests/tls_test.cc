// The handshake of hyperpack's connections, over real loopback sockets: TLS from the token or
// from certificates, and the attacks it must refuse (a proxy that flips or injects bytes after the
// handshake, a replayed handshake, a rogue server, revoked, expired and foreign certificates, a
// plaintext peer). Each refused exchange ends without the server's frame reaching the peer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <optional>
#include <string>

#include "protocol.h"
#include "test_util.h"
#include "tls.h"

namespace hyperpack::scheduler::protocol {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using tls::TlsContext;

constexpr char kToken[] = "0123456789abcdef-shared-secret";
constexpr char kLaunch[] = "launch: sh train.sh --lr 0.1";

std::shared_ptr<TlsContext> Make(const Credentials& c, tls::End end) {
  auto made = TlsContext::Make(c, end);
  if (!made.ok()) {
    ADD_FAILURE() << made.status().message();
    return nullptr;
  }
  return *made;
}

Credentials WithToken(const std::string& token = kToken) {
  Credentials c;
  c.token = token;
  return c;
}

// What a proxy between the two ends does to the server's records once the peer has sent its
// hello (its second encrypted record, after its Finished): to the second of them, the frame
// after the welcome.
enum class Attack { kNone, kFlip, kInject };

struct Outcome {
  Status server = Status::Internal("no handshake");
  Status client = Status::Internal("no handshake");
  std::optional<Json> received;  // the frame the server sent after its welcome, as read
  Status receive = Status::Internal("nothing read");
  std::string client_bytes, server_bytes;  // as the proxy saw them
};

asio::awaitable<bool> ReadN(tcp::socket& s, std::string* out, size_t n) {
  out->assign(n, '\0');
  boost::system::error_code ec;
  co_await asio::async_read(s, asio::buffer(*out), asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

asio::awaitable<bool> WriteAll(tcp::socket& s, const std::string& bytes) {
  boost::system::error_code ec;
  co_await asio::async_write(s, asio::buffer(bytes), asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

struct ProxyState {
  Attack attack = Attack::kNone;
  int client_records = 0;  // encrypted records from the peer
  int server_records = 0;  // encrypted records from the server after the peer's second
  Outcome* out = nullptr;
};

// TLS records from the peer to the server, counted and copied.
// The proxy's two sockets and its state, shared by its two pumps: the one spawned may outlive the
// coroutine that spawned it.
struct Link {
  tcp::socket peer, server;
  ProxyState st;
};

asio::awaitable<void> PeerToServer(std::shared_ptr<Link> link) {
  tcp::socket& from = link->peer;
  tcp::socket& to = link->server;
  ProxyState& st = link->st;
  std::string header, body;
  while (co_await ReadN(from, &header, 5)) {
    const size_t n = (size_t(uint8_t(header[3])) << 8) | uint8_t(header[4]);
    if (!co_await ReadN(from, &body, n)) break;
    if (header[0] == 23) ++st.client_records;
    const std::string record = header + body;
    st.out->client_bytes += record;
    if (!co_await WriteAll(to, record)) break;
  }
  boost::system::error_code ignored;
  from.close(ignored);
  to.close(ignored);
}

// The server's plaintext challenge, then its TLS records, attacked as st.attack says.
asio::awaitable<void> ServerToPeer(std::shared_ptr<Link> link) {
  tcp::socket& from = link->server;
  tcp::socket& to = link->peer;
  ProxyState& st = link->st;
  std::string header, body;
  bool ok = co_await ReadN(from, &header, 4);
  const size_t first = (size_t(uint8_t(header[2])) << 8) | uint8_t(header[3]);
  if (ok) ok = co_await ReadN(from, &body, first);
  const std::string challenge = header + body;
  if (ok) ok = co_await WriteAll(to, challenge);
  while (ok && co_await ReadN(from, &header, 5)) {
    const size_t n = (size_t(uint8_t(header[3])) << 8) | uint8_t(header[4]);
    if (!co_await ReadN(from, &body, n)) break;
    st.out->server_bytes += header + body;
    if (header[0] == 23 && st.client_records >= 2 && ++st.server_records == 2) {
      if (st.attack == Attack::kFlip) body[body.size() / 2] ^= 0x01;
      // (Temporaries stay out of co_await expressions: GCC 12 destroys some of them twice.)
      const std::string injected = *EncodeFrame(Progress{"injected: rm -rf /"}.ToJson());
      if (st.attack == Attack::kInject) ok = co_await WriteAll(to, injected);
    }
    const std::string record = header + body;
    ok = ok && co_await WriteAll(to, record);
  }
  boost::system::error_code ignored;
  from.close(ignored);
  to.close(ignored);
}

asio::awaitable<void> Proxy(tcp::acceptor& acceptor, uint16_t server_port, ProxyState st) {
  tcp::socket peer = co_await acceptor.async_accept(asio::use_awaitable);
  auto link =
      std::make_shared<Link>(Link{std::move(peer), tcp::socket(acceptor.get_executor()), st});
  co_await link->server.async_connect({asio::ip::address_v4::loopback(), server_port},
                                      asio::use_awaitable);
  auto executor = co_await asio::this_coro::executor;
  asio::co_spawn(executor, PeerToServer(link), asio::detached);
  co_await ServerToPeer(link);
}

// The server's end: the handshake, then a frame the peer must not get unless all is well.
asio::awaitable<void> ServeOne(tcp::acceptor& acceptor, TlsContext& context, std::string token,
                               Outcome* out) {
  auto c = std::make_shared<Connection>(co_await acceptor.async_accept(asio::use_awaitable));
  Result<Role> role = co_await ServerHandshake(*c, context, token, 0);
  out->server = role.status();
  if (role.ok()) {
    c->Send(Progress{kLaunch}.ToJson());
    (void)co_await c->Receive();  // until the peer closes
  }
  c->Close();
}

asio::awaitable<void> Dial(uint16_t port, TlsContext& context, std::string host, std::string token,
                           Outcome* out) {
  tcp::socket socket(co_await asio::this_coro::executor);
  co_await socket.async_connect({asio::ip::address_v4::loopback(), port}, asio::use_awaitable);
  auto c = std::make_shared<Connection>(std::move(socket));
  Result<Welcome> welcome = co_await ClientHandshake(*c, context, host, token, Role::kAgent);
  out->client = welcome.status();
  if (welcome.ok()) {
    Result<Json> frame = co_await c->Receive();
    out->receive = frame.status();
    if (frame.ok()) out->received = *frame;
  }
  c->Close();
}

// One exchange: the server with `server_ctx` and `server_token`, the peer with its own, through a
// proxy that carries out `attack`.
Outcome Exchange(TlsContext& server_ctx, TlsContext& client_ctx,
                 const std::string& client_token = kToken, Attack attack = Attack::kNone,
                 const std::string& host = "127.0.0.1") {
  Outcome out;
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::address_v4::loopback(), 0});
  tcp::acceptor proxy(io, {asio::ip::address_v4::loopback(), 0});
  ProxyState st{attack, 0, 0, &out};
  asio::co_spawn(io, ServeOne(acceptor, server_ctx, kToken, &out), asio::detached);
  asio::co_spawn(io, Proxy(proxy, acceptor.local_endpoint().port(), st), asio::detached);
  asio::co_spawn(io, Dial(proxy.local_endpoint().port(), client_ctx, host, client_token, &out),
                 asio::detached);
  io.run_for(std::chrono::seconds(30));
  EXPECT_TRUE(io.stopped()) << "the exchange did not end within 30 s";
  return out;
}

TEST(TlsTest, TwoEndsWithTheTokenTalkOverTlsAndNothingReadableCrossesTheWire) {
  auto server = Make(WithToken(), tls::End::kServer);
  auto client = Make(WithToken(), tls::End::kClient);
  ASSERT_TRUE(server && client);
  EXPECT_EQ(server->mode(), tls::Mode::kPsk);
  Outcome out = Exchange(*server, *client);
  ASSERT_TRUE(out.server.ok()) << out.server.message();
  ASSERT_TRUE(out.client.ok()) << out.client.message();
  ASSERT_TRUE(out.received.has_value()) << out.receive.message();
  EXPECT_EQ((*out.received)["text"], kLaunch);
  // Only the challenge goes in plaintext: the hello, its MAC and the launch do not.
  EXPECT_THAT(out.server_bytes, Not(HasSubstr("launch")));
  EXPECT_THAT(out.client_bytes, Not(HasSubstr("hello")));
  EXPECT_THAT(out.client_bytes, Not(HasSubstr("agent")));
}

TEST(TlsTest, APeerWithAnotherTokenFailsTheTlsHandshakeAndGetsNothing) {
  auto server = Make(WithToken(), tls::End::kServer);
  auto client = Make(WithToken("another-token-of-16-characters"), tls::End::kClient);
  ASSERT_TRUE(server && client);
  Outcome out = Exchange(*server, *client, "another-token-of-16-characters");
  EXPECT_THAT(out.server.message(), HasSubstr("TLS handshake failed"));
  EXPECT_THAT(out.client.message(), HasSubstr("TLS handshake failed"));
  EXPECT_THAT(out.client.message(), HasSubstr("a wrong token"));
  EXPECT_EQ(out.client.code(), StatusCode::kInvalidArgument) << "a refusal, not a server gone";
  EXPECT_FALSE(out.received.has_value());
}

TEST(TlsTest, AByteFlippedOrAFrameInjectedAfterTheHandshakeEndsTheConnectionUnread) {
  auto server = Make(WithToken(), tls::End::kServer);
  auto client = Make(WithToken(), tls::End::kClient);
  ASSERT_TRUE(server && client);
  for (Attack attack : {Attack::kFlip, Attack::kInject}) {
    Outcome out = Exchange(*server, *client, kToken, attack);
    ASSERT_TRUE(out.client.ok()) << "the handshake itself was not touched: "
                                 << out.client.message();
    EXPECT_FALSE(out.received.has_value()) << out.received->dump();
    EXPECT_FALSE(out.receive.ok());
  }
}

// Writes `bytes` after the server's challenge; what the server made of it in out->server.
asio::awaitable<void> SendAfterChallenge(uint16_t port, std::string bytes) {
  tcp::socket socket(co_await asio::this_coro::executor);
  co_await socket.async_connect({asio::ip::address_v4::loopback(), port}, asio::use_awaitable);
  std::string header, body;
  if (co_await ReadN(socket, &header, 4)) {
    const size_t n = (size_t(uint8_t(header[2])) << 8) | uint8_t(header[3]);
    if (co_await ReadN(socket, &body, n) && co_await WriteAll(socket, bytes)) {
      while (co_await ReadN(socket, &body, 1)) {
      }
    }
  }
}

Status ServerAfter(TlsContext& server_ctx, const std::string& bytes) {
  Outcome out;
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::address_v4::loopback(), 0});
  asio::co_spawn(io, ServeOne(acceptor, server_ctx, kToken, &out), asio::detached);
  asio::co_spawn(io, SendAfterChallenge(acceptor.local_endpoint().port(), bytes), asio::detached);
  io.run_for(std::chrono::seconds(30));
  EXPECT_TRUE(io.stopped()) << "the exchange did not end within 30 s";
  return out.server;
}

TEST(TlsTest, AReplayedHandshakeIsRefused) {
  auto server = Make(WithToken(), tls::End::kServer);
  auto client = Make(WithToken(), tls::End::kClient);
  ASSERT_TRUE(server && client);
  Outcome recorded = Exchange(*server, *client);
  ASSERT_TRUE(recorded.server.ok()) << recorded.server.message();
  Status replayed = ServerAfter(*server, recorded.client_bytes);
  EXPECT_FALSE(replayed.ok());
  EXPECT_THAT(replayed.message(), HasSubstr("TLS handshake failed"));
}

TEST(TlsTest, APlaintextPeerOfProtocolOneIsRefusedWithWhatToDo) {
  auto server = Make(WithToken(), tls::End::kServer);
  ASSERT_TRUE(server);
  Json hello = {{"type", "hello"}, {"version", 1}, {"role", "agent"}, {"mac", "00"}};
  Status s = ServerAfter(*server, *EncodeFrame(hello));
  EXPECT_THAT(s.message(), HasSubstr("plaintext where TLS was due"));
  EXPECT_THAT(s.message(), HasSubstr("same release"));
}

// A peer's handshake with whatever listens at `port`, given `timeout_s`.
asio::awaitable<void> DialWithin(uint16_t port, TlsContext& context, double timeout_s,
                                 Status* out) {
  tcp::socket socket(co_await asio::this_coro::executor);
  co_await socket.async_connect({asio::ip::address_v4::loopback(), port}, asio::use_awaitable);
  auto c = std::make_shared<Connection>(std::move(socket));
  Result<Welcome> welcome =
      co_await ClientHandshake(*c, context, "127.0.0.1", kToken, Role::kAgent, timeout_s);
  *out = welcome.status();
}

TEST(TlsTest, AServerThatSaysNothingIsLeftAtTheDeadline) {
  auto client = Make(WithToken(), tls::End::kClient);
  ASSERT_TRUE(client);
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::address_v4::loopback(), 0});
  tcp::socket held(io);  // accepted, and never answered
  acceptor.async_accept(held, [](boost::system::error_code) {});
  Status got = Status::Internal("no handshake ended");
  asio::co_spawn(io, DialWithin(acceptor.local_endpoint().port(), *client, 0.2, &got),
                 asio::detached);
  io.run_for(std::chrono::seconds(30));
  EXPECT_TRUE(io.stopped());
  EXPECT_EQ(got.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.message(), HasSubstr("no handshake with the server within"));
}

// Accepts one connection and ends it: at once, or after a challenge that asks for TLS, when the
// peer's first TLS bytes come (as a server going away, or past its deadline, does).
asio::awaitable<void> CloseOne(tcp::acceptor& acceptor, bool after_challenge) {
  tcp::socket s = co_await acceptor.async_accept(asio::use_awaitable);
  if (after_challenge) {
    Challenge challenge;
    challenge.nonce = "00";
    challenge.tls = true;
    const std::string frame = *EncodeFrame(challenge.ToJson());
    std::string first;
    if (co_await WriteAll(s, frame)) co_await ReadN(s, &first, 1);
  }
  s.close();
}

// Accepts one connection, finishes TLS from the token, reads the peer's hello and closes, as a
// server that goes away (or restarts) at that moment does.
asio::awaitable<void> CloseAfterHello(tcp::acceptor& acceptor, TlsContext& context) {
  auto c = std::make_shared<Connection>(co_await acceptor.async_accept(asio::use_awaitable));
  Challenge challenge;
  challenge.nonce = "00";
  challenge.tls = true;
  const Json frame = challenge.ToJson();
  const std::string host;
  Status done = co_await c->SendFirst(frame);
  if (done.ok()) done = co_await c->StartTls(context, host);
  if (done.ok()) {
    Result<Json> hello = co_await c->Receive();
    (void)hello;
  }
  c->Close();
}

TEST(TlsTest, AServerThatClosesAfterTheHelloIsNotTakenForAWrongTokenUnderTls) {
  auto server = Make(WithToken(), tls::End::kServer);
  auto client = Make(WithToken(), tls::End::kClient);
  ASSERT_TRUE(server && client);
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::address_v4::loopback(), 0});
  Status got = Status::Internal("no handshake ended");
  asio::co_spawn(io, CloseAfterHello(acceptor, *server), asio::detached);
  asio::co_spawn(io, DialWithin(acceptor.local_endpoint().port(), *client, 20, &got),
                 asio::detached);
  io.run_for(std::chrono::seconds(30));
  EXPECT_TRUE(io.stopped());
  EXPECT_EQ(got.code(), StatusCode::kUnavailable) << got.message();
  EXPECT_THAT(got.message(), HasSubstr("it went away"));
  EXPECT_THAT(got.message(), Not(HasSubstr("wrong token")));
}

TEST(TlsTest, AConnectionClosedDuringTheHandshakeIsAServerGoneNotARefusal) {
  auto client = Make(WithToken(), tls::End::kClient);
  ASSERT_TRUE(client);
  for (bool after_challenge : {false, true}) {
    asio::io_context io;
    tcp::acceptor acceptor(io, {asio::ip::address_v4::loopback(), 0});
    Status got = Status::Internal("no handshake ended");
    asio::co_spawn(io, CloseOne(acceptor, after_challenge), asio::detached);
    asio::co_spawn(io, DialWithin(acceptor.local_endpoint().port(), *client, 20, &got),
                   asio::detached);
    io.run_for(std::chrono::seconds(30));
    EXPECT_TRUE(io.stopped());
    EXPECT_EQ(got.code(), StatusCode::kUnavailable) << after_challenge << ": " << got.message();
    if (after_challenge) {
      EXPECT_THAT(got.message(), HasSubstr("the connection closed during the TLS handshake"));
    }
  }
}

// The server's end against a peer at `port`'s other end that says nothing.
asio::awaitable<void> AdmitWithin(tcp::acceptor& acceptor, TlsContext& context, double timeout_s,
                                  Status* out) {
  auto c = std::make_shared<Connection>(co_await acceptor.async_accept(asio::use_awaitable));
  Result<Role> role = co_await ServerHandshake(*c, context, kToken, 0, timeout_s);
  *out = role.status();
}

TEST(TlsTest, APeerThatSaysNothingIsLeftAtTheDeadline) {
  auto server = Make(WithToken(), tls::End::kServer);
  ASSERT_TRUE(server);
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::address_v4::loopback(), 0});
  Status got = Status::Internal("no handshake ended");
  asio::co_spawn(io, AdmitWithin(acceptor, *server, 0.2, &got), asio::detached);
  tcp::socket silent(io);  // connects, and never says a word
  silent.connect(acceptor.local_endpoint());
  io.run_for(std::chrono::seconds(30));
  EXPECT_TRUE(io.stopped());
  EXPECT_EQ(got.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.message(), HasSubstr("no hello within"));
}

TEST(TlsTest, PlaintextOnlyWhenBothEndsChoseIt) {
  Credentials plain = WithToken();
  plain.insecure = true;
  auto tls_server = Make(WithToken(), tls::End::kServer);
  auto tls_client = Make(WithToken(), tls::End::kClient);
  auto plain_server = Make(plain, tls::End::kServer);
  auto plain_client = Make(plain, tls::End::kClient);
  ASSERT_TRUE(tls_server && tls_client && plain_server && plain_client);

  Outcome downgraded = Exchange(*plain_server, *tls_client);
  EXPECT_THAT(downgraded.client.message(), HasSubstr("offers no TLS"));
  EXPECT_FALSE(downgraded.received.has_value());
  Outcome insecure_peer = Exchange(*tls_server, *plain_client);
  EXPECT_THAT(insecure_peer.client.message(), HasSubstr("requires TLS"));
  EXPECT_FALSE(insecure_peer.received.has_value());
}

// A CA, and certificates signed by it, made by the project's own script.
class CertificatesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    other_ = new testing::TempDir();
    const std::string script = std::string(HYPERPACK_SOURCE_DIR) + "/scripts/cluster-certs";
    auto made = testing::RunCommand({script, dir_->path().string(), "127.0.0.1", "node1", "node2"});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    auto expired =
        testing::RunCommand({"/usr/bin/env", "START=20200101000000Z", "END=20200102000000Z", script,
                             dir_->path().string(), "old"});
    ASSERT_EQ(expired.exit_code, 0) << expired.err;
    auto revoked = testing::RunCommand({script, "--revoke", dir_->path().string(), "node2"});
    ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
    auto foreign = testing::RunCommand({script, other_->path().string(), "node1"});
    ASSERT_EQ(foreign.exit_code, 0) << foreign.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete other_;
  }

  static Credentials Of(const testing::TempDir& dir, const std::string& name, bool crl = false) {
    Credentials c = WithToken();
    c.ca_file = *dir_ / "ca.pem";
    c.cert_file = dir / (name + ".pem");
    c.key_file = dir / (name + ".key");
    if (crl) c.crl_file = *dir_ / "crl.pem";
    return c;
  }

  // The server as 127.0.0.1 (checking the revocation list), and a peer with `peer`.
  Outcome With(const Credentials& peer, const std::string& server_name = "127.0.0.1") {
    auto server = Make(Of(*dir_, server_name, true), tls::End::kServer);
    auto client = Make(peer, tls::End::kClient);
    if (!server || !client) return {};
    EXPECT_EQ(server->mode(), tls::Mode::kCertificates);
    return Exchange(*server, *client);
  }

  static testing::TempDir* dir_;
  static testing::TempDir* other_;
};
testing::TempDir* CertificatesTest::dir_ = nullptr;
testing::TempDir* CertificatesTest::other_ = nullptr;

TEST_F(CertificatesTest, BothEndsWithCertificatesOfTheClusterCaTalk) {
  Outcome out = With(Of(*dir_, "node1"));
  ASSERT_TRUE(out.client.ok()) << out.client.message();
  ASSERT_TRUE(out.received.has_value()) << out.receive.message();
  EXPECT_EQ((*out.received)["text"], kLaunch);
}

TEST_F(CertificatesTest, APeerWithACertificateOfAnotherCaIsRefused) {
  Outcome out = With(Of(*other_, "node1"));
  EXPECT_THAT(out.server.message(), HasSubstr("TLS handshake failed"));
  EXPECT_FALSE(out.received.has_value());
}

TEST_F(CertificatesTest, ARevokedCertificateIsRefused) {
  Outcome out = With(Of(*dir_, "node2"));
  EXPECT_THAT(out.server.message(), HasSubstr("TLS handshake failed"));
  EXPECT_THAT(out.server.message(), HasSubstr("revoked"));
  // Under TLS 1.3 the peer learns it at its first read, and is told what it means.
  EXPECT_THAT(out.client.message(), HasSubstr("did not accept this end's certificate"));
  EXPECT_EQ(out.client.code(), StatusCode::kInvalidArgument) << "the server's alert: a refusal";
  EXPECT_FALSE(out.received.has_value());
}

TEST_F(CertificatesTest, AnExpiredCertificateIsRefused) {
  Outcome out = With(Of(*dir_, "old"));
  EXPECT_THAT(out.server.message(), HasSubstr("expired"));
  EXPECT_FALSE(out.received.has_value());
}

TEST_F(CertificatesTest, ARogueServerWhoseCertificateNamesAnotherHostIsRefusedByThePeer) {
  // node1's certificate is the cluster CA's, but not for the address the peer dialled.
  Outcome out = With(Of(*dir_, "127.0.0.1"), "node1");
  EXPECT_THAT(out.client.message(), HasSubstr("TLS handshake failed"));
  EXPECT_FALSE(out.received.has_value());
}

TEST_F(CertificatesTest, APeerWithTheTokenButNoCertificateIsRefused) {
  Outcome out = With(WithToken());
  EXPECT_FALSE(out.server.ok());
  EXPECT_FALSE(out.received.has_value());
}

TEST_F(CertificatesTest, KeysOpenToOthersAndHalfGivenCertificatesAreClearErrors) {
  Credentials loose = Of(*dir_, "node1");
  ASSERT_EQ(chmod(loose.key_file.c_str(), 0644), 0);
  auto made = TlsContext::Make(loose, tls::End::kClient);
  chmod(loose.key_file.c_str(), 0600);
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.status().message(), HasSubstr("chmod 600 " + loose.key_file));

  Credentials half = WithToken();
  half.ca_file = loose.ca_file;
  auto partial = TlsContext::Make(half, tls::End::kServer);
  ASSERT_FALSE(partial.ok());
  EXPECT_THAT(partial.status().message(), HasSubstr("all three of --tls-ca"));
}

}  // namespace
}  // namespace hyperpack::scheduler::protocol
