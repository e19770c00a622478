// The sockets of real processes as `hangscope dump --json` shows them: a server listening on a
// unix socket path, an abstract unix name and loopback TCP, and a client connected to all
// three; each end names the other (unix peer inodes, TCP addresses swapped).
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "target_process.h"

namespace hangscope {
namespace {

const char* kServer = R"(
import socket, sys, time
path, abstract = sys.argv[1], sys.argv[2]
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); u.bind(path); u.listen()
a = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); a.bind('\0' + abstract); a.listen()
t = socket.socket(); t.bind(('127.0.0.1', 0)); t.listen()
print('ready', t.getsockname()[1], flush=True)
held = [u.accept()[0], a.accept()[0], t.accept()[0]]
print('accepted', flush=True)
time.sleep(600)
)";

const char* kClient = R"(
import socket, sys, time
path, abstract, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); u.connect(path)
a = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); a.connect('\0' + abstract)
t = socket.create_connection(('127.0.0.1', port))
print('connected', flush=True)
time.sleep(600)
)";

nlohmann::json sockets_of(pid_t pid) {
  const auto result = testing::run_command(std::string(HANGSCOPE_BINARY) + " dump --pid " +
                                           std::to_string(pid) + " --json");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return nlohmann::json::parse(result.out).at("sockets");
}

// The socket of `sockets` whose `key` is `value` (and state, when given); null when none.
const nlohmann::json* find(const nlohmann::json& sockets, const std::string& key,
                           const nlohmann::json& value, const std::string& state = "") {
  for (const auto& s : sockets) {
    if (s.value(key, nlohmann::json()) == value && (state.empty() || s["state"] == state)) {
      return &s;
    }
  }
  return nullptr;
}

TEST(Sockets, DumpShowsEachEndOfUnixAndTcpConnections) {
  const std::string path = testing::temp_path("hangscope-sockets") + ".ipc";
  const std::string abstract = "hangscope-test-" + std::to_string(::getpid());
  testing::TargetProcess server({"/usr/bin/python3", "-c", kServer, path, abstract});
  const std::string ready = server.wait_for_line("ready");
  const std::string port = ready.substr(ready.find(' ') + 1);
  testing::TargetProcess client({"/usr/bin/python3", "-c", kClient, path, abstract, port});
  client.wait_for_line("connected");
  server.wait_for_line("accepted");

  const auto mine = sockets_of(server.pid());
  const auto theirs = sockets_of(client.pid());
  ::unlink(path.c_str());
  SCOPED_TRACE("server: " + mine.dump() + "\nclient: " + theirs.dump());

  // The unix socket path: the listener, and the accepted end (which carries the listener's
  // name) paired with the client's unnamed end.
  const auto* listener = find(mine, "path", path, "listen");
  ASSERT_NE(listener, nullptr);
  EXPECT_EQ((*listener)["family"], "unix");
  EXPECT_EQ((*listener)["type"], "stream");
  const auto* accepted = find(mine, "path", path, "connected");
  ASSERT_NE(accepted, nullptr);
  const auto* connected = find(theirs, "inode", (*accepted)["peer_inode"]);
  ASSERT_NE(connected, nullptr);
  EXPECT_EQ((*connected)["peer_inode"], (*accepted)["inode"]);
  EXPECT_EQ((*connected)["state"], "connected");
  EXPECT_TRUE((*connected)["path"].is_null());  // the client never bound a name
  EXPECT_GE((*connected)["fd"].get<int>(), 3);

  // The abstract name, a seqpacket socket.
  const std::string name = "@" + abstract;
  ASSERT_NE(find(mine, "path", name, "listen"), nullptr);
  const auto* abstract_end = find(mine, "path", name, "connected");
  ASSERT_NE(abstract_end, nullptr);
  EXPECT_EQ((*abstract_end)["type"], "seqpacket");
  const auto* abstract_peer = find(theirs, "inode", (*abstract_end)["peer_inode"]);
  ASSERT_NE(abstract_peer, nullptr);
  EXPECT_EQ((*abstract_peer)["peer_inode"], (*abstract_end)["inode"]);

  // Loopback TCP: the listener, and the two ends of one connection with their addresses swapped.
  const std::string server_end = "127.0.0.1:" + port;
  ASSERT_NE(find(mine, "local", server_end, "listen"), nullptr);
  const auto* tcp_accepted = find(mine, "local", server_end, "established");
  ASSERT_NE(tcp_accepted, nullptr);
  EXPECT_EQ((*tcp_accepted)["family"], "tcp");
  const auto* tcp_client = find(theirs, "remote", server_end, "established");
  ASSERT_NE(tcp_client, nullptr);
  EXPECT_EQ((*tcp_client)["local"], (*tcp_accepted)["remote"]);
}

}  // namespace
}  // namespace hangscope
