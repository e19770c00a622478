// The socket reader's parts on bytes built by hand: sock_diag's unix answers (names, peers, an
// abstract name, the end of the dump, a refusal, and answers cut short or malformed) and its TCP
// answers (inet_diag: both families, queues, retransmissions), the descriptors of this process's
// own sockets, and its own TCP connections read through sock_diag and through /proc alike.
#include "hangscope/capture/sockets.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "hangscope/common/error.h"
#include "hangscope/facts/network.h"

namespace hangscope::capture {
namespace {

// Little helpers that append native-endian integers, as the kernel writes them.
void put8(std::string& out, std::uint8_t v) {
  out.push_back(static_cast<char>(v));
}
void put16(std::string& out, std::uint16_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put32(std::string& out, std::uint32_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void pad4(std::string& out) {
  while (out.size() % 4) out.push_back('\0');
}

// An rtattr: length (header included, padding not), type, payload, padding.
std::string attribute(std::uint16_t type, const std::string& payload) {
  std::string out;
  put16(out, static_cast<std::uint16_t>(4 + payload.size()));
  put16(out, type);
  out += payload;
  pad4(out);
  return out;
}

// A netlink message: nlmsghdr (length, type, flags, sequence, port) and its body.
std::string message(std::uint16_t type, const std::string& body) {
  std::string out;
  put32(out, static_cast<std::uint32_t>(16 + body.size()));
  put16(out, type);
  put16(out, 2);  // NLM_F_MULTI
  put32(out, 1);
  put32(out, 0);
  out += body;
  pad4(out);
  return out;
}

// unix_diag_msg: family, type, state, pad, inode, cookie[2]; then its attributes.
std::string unix_message(std::uint8_t type, std::uint8_t state, std::uint32_t inode,
                         const std::string& attributes) {
  std::string body;
  put8(body, 1);  // AF_UNIX
  put8(body, type);
  put8(body, state);
  put8(body, 0);
  put32(body, inode);
  put32(body, 0x1234);
  put32(body, 0);
  return message(20, body + attributes);  // SOCK_DIAG_BY_FAMILY
}

std::string peer(std::uint32_t inode) {
  std::string payload;
  put32(payload, inode);
  return attribute(2, payload);  // UNIX_DIAG_PEER
}

std::string name(const std::string& sun_path) {
  return attribute(0, sun_path);  // UNIX_DIAG_NAME
}

std::string done() {
  std::string body;
  put32(body, 0);
  return message(3, body);  // NLMSG_DONE
}

TEST(UnixDiag, NamesTypesStatesAndPeersAreRead) {
  const std::string path = std::string("/tmp/a7f3-input.ipc") + '\0';
  const std::string bytes =
      unix_message(1, 10, 4100, name(path)) +              // a listener on a path
      unix_message(1, 1, 4101, name(path) + peer(4102)) +  // the accepted end
      unix_message(1, 1, 4102, peer(4101)) +               // the client, unnamed
      unix_message(5, 1, 4103, name(std::string("\0vllm\0x", 7)) + attribute(7, "zzzz")) +
      unix_message(2, 7, 4104, "") + done();
  const auto answer = parse_unix_diag(bytes);
  EXPECT_TRUE(answer.done);
  ASSERT_EQ(answer.sockets.size(), 5u);
  EXPECT_EQ(answer.sockets[0].inode, 4100u);
  EXPECT_EQ(answer.sockets[0].state, model::SocketState::kListen);
  EXPECT_EQ(answer.sockets[0].state_name(), "listen");
  EXPECT_EQ(answer.sockets[0].type, "stream");
  EXPECT_EQ(answer.sockets[0].path, "/tmp/a7f3-input.ipc");
  EXPECT_EQ(answer.sockets[0].peer_inode, 0u);
  EXPECT_EQ(answer.sockets[1].state, model::SocketState::kEstablished);
  EXPECT_EQ(answer.sockets[1].state_name(), "connected");
  EXPECT_EQ(answer.sockets[1].path, "/tmp/a7f3-input.ipc");
  EXPECT_EQ(answer.sockets[1].peer_inode, 4102u);
  EXPECT_EQ(answer.sockets[2].path, "");
  EXPECT_EQ(answer.sockets[2].peer_inode, 4101u);
  EXPECT_EQ(answer.sockets[3].type, "seqpacket");
  EXPECT_EQ(answer.sockets[3].path, "@vllm@x");  // abstract, its NULs as '@'; unknown attr skipped
  EXPECT_EQ(answer.sockets[4].type, "dgram");
  EXPECT_EQ(answer.sockets[4].state, model::SocketState::kClose);
  EXPECT_EQ(answer.sockets[4].state_name(), "unconnected");
  for (const auto& s : answer.sockets) EXPECT_EQ(s.family, model::Socket::Family::kUnix);
}

TEST(UnixDiag, AnAnswerWithoutItsEndIsNotDone) {
  const auto answer = parse_unix_diag(unix_message(1, 1, 7, peer(8)));
  EXPECT_FALSE(answer.done);
  ASSERT_EQ(answer.sockets.size(), 1u);
  EXPECT_EQ(answer.sockets[0].peer_inode, 8u);
  EXPECT_TRUE(parse_unix_diag("").sockets.empty());
}

TEST(UnixDiag, MessagesCutShortOrMalformedAreErrorsNamingTheOffset) {
  const std::string whole = unix_message(1, 1, 7, peer(8));
  const std::string two = whole + whole;
  // Cut inside the second message's header, inside its body, and inside its attribute.
  for (std::size_t cut : {whole.size() + 10, whole.size() + 20, two.size() - 2}) {
    try {
      parse_unix_diag(two.substr(0, cut));
      ADD_FAILURE() << "cut at " << cut << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("at byte " + std::to_string(whole.size())),
                std::string::npos)
          << e.what();
    }
  }
  // A message shorter than unix_diag_msg, an attribute longer than its message, a length
  // shorter than the netlink header.
  EXPECT_THROW(parse_unix_diag(message(20, "abcd")), Error);
  std::string long_attribute;
  put16(long_attribute, 200);
  put16(long_attribute, 2);
  put32(long_attribute, 9);
  EXPECT_THROW(parse_unix_diag(unix_message(1, 1, 7, long_attribute)), Error);
  std::string short_length = whole;
  short_length[0] = 4;
  short_length[1] = short_length[2] = short_length[3] = 0;
  EXPECT_THROW(parse_unix_diag(short_length), Error);
}

TEST(UnixDiag, ARefusalCarriesItsErrno) {
  std::string body;
  put32(body, static_cast<std::uint32_t>(-EPERM));
  try {
    parse_unix_diag(message(2, body));  // NLMSG_ERROR
    ADD_FAILURE() << "a refusal accepted";
  } catch (const SystemError& e) {
    EXPECT_EQ(e.error_number(), EPERM);
  }
}

TEST(UnixDiag, SocketNamesFromSunPath) {
  EXPECT_EQ(unix_socket_name(std::string("/run/x.sock\0\0", 13)), "/run/x.sock");
  EXPECT_EQ(unix_socket_name(std::string("\0abc", 4)), "@abc");
  EXPECT_EQ(unix_socket_name(""), "");
  EXPECT_EQ(unix_socket_name("\xff\xfe/p"), "\xff\xfe/p");  // bytes kept; encoders make them UTF-8
}

// This process's own socket pair: both descriptors, in fd order, one per inode, and the cap.
TEST(SocketDescriptors, OwnSocketsAreListedInFdOrderAndCapped) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  const int copy = ::dup(pair[0]);
  std::vector<std::pair<int, std::uint64_t>> held;
  std::size_t left_out = 0;
  ASSERT_TRUE(facts::socket_descriptors("/proc/self", 4096, held, left_out));
  EXPECT_EQ(left_out, 0u);
  int seen = 0;
  for (std::size_t i = 0; i < held.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(held[i - 1].first, held[i].first);
    }
    if (held[i].first == pair[0] || held[i].first == pair[1]) ++seen;
    EXPECT_NE(held[i].first, copy);  // the dup'ed descriptor is the same socket
  }
  EXPECT_EQ(seen, 2);
  std::vector<std::pair<int, std::uint64_t>> one;
  ASSERT_TRUE(facts::socket_descriptors("/proc/self", 1, one, left_out));
  EXPECT_EQ(one.size(), 1u);
  EXPECT_EQ(left_out, held.size() - 1);
  EXPECT_FALSE(facts::socket_descriptors("/proc/no-such-process", 4096, one, left_out));
  ::close(copy);
  ::close(pair[0]);
  ::close(pair[1]);
}

// inet_diag_msg: family, state, timer, retrans; id (sport, dport big-endian, src[4], dst[4],
// if, cookie[2]); expires, rqueue, wqueue, uid, inode.
std::string inet_message(std::uint8_t family, std::uint8_t state, const std::string& src,
                         std::uint16_t sport, const std::string& dst, std::uint16_t dport,
                         std::uint32_t inode, std::uint32_t rqueue = 0, std::uint32_t wqueue = 0,
                         std::uint8_t timer = 0, std::uint8_t retrans = 0) {
  std::string body;
  put8(body, family);
  put8(body, state);
  put8(body, timer);
  put8(body, retrans);
  put16(body, htons(sport));
  put16(body, htons(dport));
  const auto put_address = [&](const std::string& text) {
    std::string bytes(16, '\0');
    ::inet_pton(family == AF_INET6 ? AF_INET6 : AF_INET, text.c_str(), bytes.data());
    body += bytes;
  };
  put_address(src);
  put_address(dst);
  put32(body, 0);       // interface
  put32(body, 0x5a5a);  // cookie
  put32(body, 0);
  put32(body, 0);  // expires
  put32(body, rqueue);
  put32(body, wqueue);
  put32(body, 0);  // uid
  put32(body, inode);
  return message(18, body);  // TCPDIAG_GETSOCK, as the kernel answers that request
}

TEST(InetDiag, BothFamiliesWithTheirQueuesAndStatesAreRead) {
  const std::string bytes =
      inet_message(AF_INET, 10, "0.0.0.0", 29500, "0.0.0.0", 0, 700, 3, 128) +  // listen
      inet_message(AF_INET, 1, "10.0.0.1", 41000, "10.0.0.2", 29500, 701, 5, 9, 1, 4) +
      inet_message(AF_INET6, 2, "::ffff:10.0.0.1", 41001, "::ffff:10.0.0.3", 29500, 702) +
      inet_message(AF_INET6, 1, "fd00::1", 80, "fd00::2", 5555, 703, 0, 0, 2, 7) + done();
  const auto answer = facts::parse_inet_diag(bytes);
  EXPECT_TRUE(answer.done);
  ASSERT_EQ(answer.sockets.size(), 4u);
  EXPECT_EQ(answer.families, (std::vector<int>{AF_INET, AF_INET, AF_INET6, AF_INET6}));
  const auto& listener = answer.sockets[0];
  EXPECT_EQ(listener.state, model::SocketState::kListen);
  EXPECT_EQ(listener.local(), "0.0.0.0:29500");
  EXPECT_EQ(listener.rx_queue, 3u);  // its accept backlog, as /proc shows it
  EXPECT_EQ(listener.tx_queue, 0u);  // not its backlog limit: /proc shows 0
  EXPECT_EQ(listener.inode, 700u);
  const auto& lossy = answer.sockets[1];
  EXPECT_EQ(lossy.state, model::SocketState::kEstablished);
  EXPECT_EQ(lossy.local(), "10.0.0.1:41000");
  EXPECT_EQ(lossy.remote(), "10.0.0.2:29500");
  EXPECT_EQ(lossy.rx_queue, 5u);
  EXPECT_EQ(lossy.tx_queue, 9u);
  EXPECT_EQ(lossy.retransmits, 4u);  // under the retransmission timer
  const auto& mapped = answer.sockets[2];
  EXPECT_EQ(mapped.state, model::SocketState::kSynSent);
  EXPECT_EQ(mapped.local(), "10.0.0.1:41001");  // IPv4-mapped, as /proc's parser writes it
  EXPECT_EQ(mapped.remote(), "10.0.0.3:29500");
  const auto& v6 = answer.sockets[3];
  EXPECT_EQ(v6.local(), "[fd00::1]:80");
  EXPECT_EQ(v6.remote(), "[fd00::2]:5555");
  EXPECT_EQ(v6.retransmits, 0u);  // keepalive probes are no retransmissions
}

TEST(InetDiag, AnswersCutShortOrRefusedAreErrors) {
  const std::string whole = inet_message(AF_INET, 1, "127.0.0.1", 1, "127.0.0.1", 2, 9);
  EXPECT_FALSE(facts::parse_inet_diag(whole).done);
  try {
    facts::parse_inet_diag(whole + whole.substr(0, whole.size() - 8));
    ADD_FAILURE() << "a message cut short was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at byte " + std::to_string(whole.size())),
              std::string::npos)
        << e.what();
  }
  std::string small;
  put32(small, 0);
  EXPECT_THROW(facts::parse_inet_diag(message(18, small)), Error);  // shorter than inet_diag_msg
  std::string unknown = whole;
  unknown[16] = 7;  // a family that is neither
  EXPECT_THROW(facts::parse_inet_diag(unknown), Error);
  std::string refusal;
  put32(refusal, static_cast<std::uint32_t>(-ENOENT));
  try {
    facts::parse_inet_diag(message(2, refusal));  // NLMSG_ERROR
    ADD_FAILURE() << "a refusal was accepted";
  } catch (const SystemError& e) {
    EXPECT_EQ(e.error_number(), ENOENT);
  }
}

// A listener and both ends of a loopback connection held by this process: sock_diag gives
// them as /proc/self/net/tcp does, and read_sockets describes them from either.
TEST(InetDiag, OwnConnectionsAreWhatProcShows) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const int server = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(server, 0);
  ASSERT_EQ(::write(client, "abc", 3), 3);  // three bytes the server has not read

  std::vector<std::string> notes;
  auto from_proc = facts::read_tcp_tables("/proc/self", notes);
  EXPECT_TRUE(notes.empty());
  std::vector<facts::TcpSocket> from_diag;
  try {
    from_diag = facts::dump_tcp_sockets();
  } catch (const Error& e) {
    GTEST_SKIP() << "sock_diag gives no TCP sockets here: " << e.what();
  }
  const auto key = [](const facts::TcpSocket& s) {
    return std::tuple(s.inode, s.local(), s.remote(), s.state, s.tx_queue, s.rx_queue,
                      s.retransmits);
  };
  std::vector<std::uint64_t> mine;
  for (const auto& [fd, inode] : [&] {
         std::vector<std::pair<int, std::uint64_t>> held;
         std::size_t left_out = 0;
         facts::socket_descriptors("/proc/self", 4096, held, left_out);
         return held;
       }()) {
    mine.push_back(inode);
  }
  int compared = 0;
  for (const auto inode : mine) {
    const auto in = [&](const std::vector<facts::TcpSocket>& table) {
      return std::find_if(table.begin(), table.end(),
                          [&](const facts::TcpSocket& s) { return s.inode == inode; });
    };
    const auto proc = in(from_proc);
    const auto diag = in(from_diag);
    ASSERT_EQ(proc == from_proc.end(), diag == from_diag.end()) << "inode " << inode;
    if (proc == from_proc.end()) continue;
    EXPECT_EQ(key(*proc), key(*diag)) << "inode " << inode;
    ++compared;
  }
  EXPECT_EQ(compared, 3);  // the listener and both ends

  const auto described = read_sockets(::getpid(), notes);
  const auto port = std::to_string(ntohs(address.sin_port));
  const auto server_end = std::find_if(described.begin(), described.end(),
                                       [&](const auto& s) { return s.fd == server; });
  ASSERT_NE(server_end, described.end());
  EXPECT_EQ(server_end->family, model::Socket::Family::kTcp);
  EXPECT_EQ(server_end->local, "127.0.0.1:" + port);
  EXPECT_EQ(server_end->rx_queue, 3u);
  ::close(server);
  ::close(client);
  ::close(listener);
}

}  // namespace
}  // namespace hangscope::capture
