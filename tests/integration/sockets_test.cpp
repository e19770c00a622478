// The sockets of real processes as `hangscope dump --sockets --json` shows them: a server
// listening on a unix socket path, an abstract unix name and loopback TCP, and a client
// connected to all three; each end names the other (unix peer inodes, TCP addresses swapped).
// Without --sockets, `dump` reads no socket at all (the system calls it makes, under strace);
// a node capture reads each network namespace's tables once for all its processes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

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
                                           std::to_string(pid) + " --sockets --json");
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

// A process holding a TCP listener, a loopback connection to it and a unix socket pair.
const char* kHolder = R"(
import socket, time
t = socket.socket(); t.bind(('127.0.0.1', 0)); t.listen()
c = socket.create_connection(t.getsockname()); a = t.accept()[0]
u = socket.socketpair()
print('ready', flush=True)
time.sleep(600)
)";

bool have_strace() {
  return testing::run_command("strace -V >/dev/null 2>&1").exit_code == 0;
}

// The system calls `hangscope ARGS` makes that read sockets, from outside (strace, every
// thread and child): opening PROC/fd, PROC/net/* or the namespace link, readlink of
// PROC/fd/N, and sock_diag sockets. `out` gets its stdout.
std::vector<std::string> socket_reads(const std::string& args, pid_t pid, std::string& out,
                                      std::string& trace_text) {
  const std::string trace = testing::temp_path("hangscope-sockets-trace");
  const auto result =
      testing::run_command("strace -f -qq -e trace=open,openat,readlink,readlinkat,socket -o " +
                           trace + " " + HANGSCOPE_BINARY + " " + args);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  out = result.out;
  std::ifstream in(trace);
  std::stringstream text;
  text << in.rdbuf();
  trace_text = text.str();
  ::unlink(trace.c_str());
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::regex reads("\"" + proc + "/(fd|net/|ns/net)|NETLINK_SOCK_DIAG");
  std::vector<std::string> found;
  std::istringstream lines(trace_text);
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, reads)) found.push_back(line);
  }
  return found;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  return text;
}

TEST(Sockets, DumpReadsNoSocketWithoutTheFlag) {
  if (!have_strace()) GTEST_SKIP() << "strace is not installed (tools/install-deps.sh)";
  testing::TargetProcess holder({"/usr/bin/python3", "-c", kHolder});
  holder.wait_for_line("ready");
  const auto pid = holder.pid();
  std::string out, trace;
  const auto without =
      socket_reads("dump --pid " + std::to_string(pid) + " --json", pid, out, trace);
  EXPECT_TRUE(without.empty()) << joined(without);
  ASSERT_NE(trace.find("/proc/" + std::to_string(pid)), std::string::npos)
      << "the trace saw no read of the process at all:\n"
      << trace;
  const auto dump = nlohmann::json::parse(out);
  EXPECT_FALSE(dump.contains("sockets")) << "not read: absent, not empty";
  EXPECT_FALSE(dump["threads"].empty());
  // The text form lists none either.
  std::string text;
  EXPECT_TRUE(socket_reads("dump --pid " + std::to_string(pid), pid, text, trace).empty());
  EXPECT_EQ(text.find("Sockets:"), std::string::npos);

  const auto with =
      socket_reads("dump --pid " + std::to_string(pid) + " --sockets --json", pid, out, trace);
  const auto sockets = nlohmann::json::parse(out).at("sockets");
  int tcp = 0, unix_sockets = 0;
  for (const auto& s : sockets) (s["family"] == "tcp" ? tcp : unix_sockets) += 1;
  EXPECT_EQ(tcp, 3) << sockets.dump();  // the listener and both ends of the connection
  EXPECT_EQ(unix_sockets, 2) << sockets.dump();
  const std::string all = joined(with);
  EXPECT_NE(all.find("/proc/" + std::to_string(pid) + "/fd"), std::string::npos) << all;
  EXPECT_NE(all.find("NETLINK_SOCK_DIAG"), std::string::npos) << all;
}

// A node capture of two processes of one network namespace reads its socket tables once (one
// unix dump and one TCP dump through sock_diag; net/tcp only when sock_diag cannot answer), for
// the sockets of both dumps and their network facts.
TEST(Sockets, NodeCaptureReadsANamespacesTablesOnce) {
  if (!have_strace()) GTEST_SKIP() << "strace is not installed (tools/install-deps.sh)";
  testing::TargetProcess first({"/usr/bin/python3", "-c", kHolder});
  testing::TargetProcess second({"/usr/bin/python3", "-c", kHolder});
  first.wait_for_line("ready");
  second.wait_for_line("ready");
  const std::string file = testing::temp_path("hangscope-sockets-node") + ".json";
  std::string out, trace;
  socket_reads("collect --once --samples 1 -o " + file + " --pid " + std::to_string(first.pid()) +
                   " --pid " + std::to_string(second.pid()),
               first.pid(), out, trace);
  std::ifstream in(file);
  const auto snapshot = nlohmann::json::parse(in);
  ::unlink(file.c_str());
  std::size_t netlink = 0, tcp_tables = 0;
  std::istringstream lines(trace);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("socket(AF_NETLINK") != std::string::npos &&
        line.find("NETLINK_SOCK_DIAG") != std::string::npos) {
      ++netlink;
    }
    if (std::regex_search(line, std::regex("/proc/[0-9]+/net/tcp"))) ++tcp_tables;
  }
  if (tcp_tables == 0) {
    EXPECT_EQ(netlink, 2u) << trace;  // unix sockets, then TCP: once for the namespace
  } else {
    EXPECT_LE(netlink, 2u) << trace;  // sock_diag refused TCP: the tables of one process
    EXPECT_LE(tcp_tables, 2u) << trace;
  }
  // Each process's sockets and network facts came out of that one read.
  const auto& processes = snapshot.at("snapshots").at(0).at("processes");
  ASSERT_EQ(processes.size(), 2u);
  for (const auto& p : processes) {
    int tcp = 0;
    for (const auto& s : p.value("sockets", nlohmann::json::array())) {
      tcp += s.value("family", "") == "TCP" ? 1 : 0;
    }
    EXPECT_EQ(tcp, 3) << p.dump();
  }
}

}  // namespace
}  // namespace hangscope
