// The read-only c10d store client against a test peer that answers like torch's TCPStore
// master daemon (both numberings: torch < 2.0, and >= 2.0 with its VALIDATE handshake), with a
// key table as ranks in a store-based barrier leave it. The peer records every query: only
// CHECK, and GET of keys that exist, may ever arrive. Also a slow peer, a closed connection,
// a reply in another protocol, and the parsing of endpoints, versions and key reprs.
#include "hangscope/collectives/c10d_store.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "hangscope/common/error.h"
#include "hangscope/model/store_keys.h"
#include "loopback_peer.h"

namespace hangscope::collectives {
namespace {

using testing::LoopbackPeer;

std::uint64_t read_u64(int fd) {
  const auto bytes = LoopbackPeer::read_exact(fd, 8);
  std::uint64_t v = 0;
  if (bytes.size() == 8) std::memcpy(&v, bytes.data(), 8);
  return v;
}

std::string read_key(int fd) {
  return LoopbackPeer::read_exact(fd, read_u64(fd));
}

// What the peer saw: "CHECK /default_pg/arrive/0", "GET …", or a violation ("SET", "ADD", …).
struct Seen {
  std::vector<std::string> queries;
  bool validated = false;
};

// A TCPStore master daemon for one client: `torch2` selects the numbering and the handshake.
std::function<void(int)> store_daemon(bool torch2, std::map<std::string, std::string> table,
                                      Seen* seen) {
  return [=](int fd) {
    const std::uint8_t get = torch2 ? 3 : 2, check = torch2 ? 5 : 4;
    if (torch2) {
      const auto hello = LoopbackPeer::read_exact(fd, 5);
      std::uint32_t magic = 0;
      if (hello.size() == 5) std::memcpy(&magic, hello.data() + 1, 4);
      seen->validated = hello.size() == 5 && hello[0] == 0 && magic == 0x3C85F7CE;
      if (!seen->validated) return;  // the daemon drops a client that does not validate
    }
    for (;;) {
      const auto type = LoopbackPeer::read_exact(fd, 1);
      if (type.empty()) return;
      const auto q = static_cast<std::uint8_t>(type[0]);
      if (q == check) {
        const auto n = read_u64(fd);
        bool all = true;
        for (std::uint64_t i = 0; i < n; ++i) {
          const auto key = read_key(fd);
          seen->queries.push_back("CHECK " + key);
          all = all && table.count(key) > 0;
        }
        LoopbackPeer::write(fd, std::string(1, all ? '\0' : '\1'));
      } else if (q == get) {
        const auto key = read_key(fd);
        const auto it = table.find(key);
        seen->queries.push_back((it == table.end() ? "BLOCKING GET " : "GET ") + key);
        if (it == table.end()) return;
        std::string reply(8, '\0');
        const std::uint64_t size = it->second.size();
        std::memcpy(reply.data(), &size, 8);
        LoopbackPeer::write(fd, reply + it->second);
      } else {
        seen->queries.push_back("FORBIDDEN query " + std::to_string(q));
        return;
      }
    }
  };
}

// Ranks 0, 1 and 3 of 4 arrived (each set its key) and counted themselves in; rank 2 did not.
std::map<std::string, std::string> barrier_table() {
  return {{"/default_pg/arrive/0", "1"},
          {"/default_pg/arrive/1", "1"},
          {"/default_pg/arrive/3", "1"},
          {"/default_pg/store_based_barrier_key:1", "3"},
          {"/init/", "4"}};
}

StoreQueryRequest request_for(const LoopbackPeer& peer, StoreProtocol protocol) {
  StoreQueryRequest r;
  r.endpoint = {"127.0.0.1", peer.port()};
  r.protocol = protocol;
  r.keys = {"arrive/0", "arrive/1", "arrive/2", "arrive/3"};
  r.counter_keys = {"store_based_barrier_key:1"};
  r.timeout = std::chrono::milliseconds(2000);
  return r;
}

void expect_read_only(const Seen& seen) {
  for (const auto& q : seen.queries) {
    EXPECT_TRUE(q.rfind("CHECK ", 0) == 0 || q.rfind("GET ", 0) == 0) << q;
  }
}

class StoreProtocols : public ::testing::TestWithParam<bool> {};

TEST_P(StoreProtocols, NamesTheMissingKeyUnderTheDefaultGroupsPrefixWithReadOnlyQueries) {
  const bool torch2 = GetParam();
  Seen seen;
  StoreQuery result;
  {
    LoopbackPeer peer(store_daemon(torch2, barrier_table(), &seen));
    result =
        query_store(request_for(peer, torch2 ? StoreProtocol::kTorch2 : StoreProtocol::kTorch1));
  }
  ASSERT_EQ(result.error, "");
  EXPECT_EQ(seen.validated, torch2);
  expect_read_only(seen);
  EXPECT_EQ(result.prefix, "default_pg/");
  EXPECT_EQ(result.missing(), std::vector<std::string>{"arrive/2"});
  ASSERT_EQ(result.keys.size(), 5u);
  EXPECT_EQ(result.keys[4].key, "store_based_barrier_key:1");
  EXPECT_EQ(result.keys[4].value, "3");
  EXPECT_EQ(result.describe(),
            "127.0.0.1:" + result.endpoint.substr(10) +
                ": 3 of 4 awaited keys exist (prefix default_pg/); missing: arrive/2; counter "
                "store_based_barrier_key:1 = 3");
  // The counter's value was read only after CHECK found it.
  const auto get = std::find(seen.queries.begin(), seen.queries.end(),
                             "GET /default_pg/store_based_barrier_key:1");
  ASSERT_NE(get, seen.queries.end());
  EXPECT_NE(std::find(seen.queries.begin(), get, "CHECK /default_pg/store_based_barrier_key:1"),
            get);
}

INSTANTIATE_TEST_SUITE_P(C10dStore, StoreProtocols, ::testing::Values(false, true),
                         [](const auto& param) { return param.param ? "Torch2" : "Torch1"; });

TEST(C10dStore, KeysNobodySetAreAllMissingAndAnAbsentCounterIsNeverRead) {
  Seen seen;
  StoreQuery result;
  {
    LoopbackPeer peer(store_daemon(true, {{"/init/", "4"}}, &seen));
    result = query_store(request_for(peer, StoreProtocol::kTorch2));
  }
  ASSERT_EQ(result.error, "");
  expect_read_only(seen);
  EXPECT_EQ(result.missing().size(), 4u);
  EXPECT_NE(result.describe().find("0 of 4 awaited keys exist (under no prefix tried)"),
            std::string::npos)
      << result.describe();
  for (const auto& q : seen.queries) EXPECT_EQ(q.rfind("GET", 0), std::string::npos) << q;
}

TEST(C10dStore, ASlowStoreTimesOutWithinTheDeadline) {
  StoreQuery result;
  const auto start = std::chrono::steady_clock::now();
  {
    LoopbackPeer peer([](int fd) { LoopbackPeer::read_exact(fd, 1 << 20); });  // never answers
    auto request = request_for(peer, StoreProtocol::kTorch1);
    request.timeout = std::chrono::milliseconds(300);
    result = query_store(request);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_NE(result.error.find("did not answer in time"), std::string::npos) << result.error;
  EXPECT_EQ(result.describe().rfind("query failed: ", 0), 0u);
}

TEST(C10dStore, AClosedConnectionAndAForeignReplyAreClearErrors) {
  {
    StoreQuery result;
    {
      LoopbackPeer peer([](int) {});  // accepts and closes
      result = query_store(request_for(peer, StoreProtocol::kTorch1));
    }
    // Closed or reset (the client's bytes were unread): either way named, with the query.
    EXPECT_EQ(result.error.rfind("the c10d store", 0), 0u) << result.error;
    EXPECT_NE(result.error.find("CHECK /arrive/0"), std::string::npos) << result.error;
  }
  {
    StoreQuery result;
    {
      LoopbackPeer peer([](int fd) {
        LoopbackPeer::read_exact(fd, 1);
        LoopbackPeer::write(fd, "HTTP/1.1 400 Bad Request\r\n");
      });
      result = query_store(request_for(peer, StoreProtocol::kTorch1));
    }
    EXPECT_NE(result.error.find("neither READY nor NOT_READY"), std::string::npos) << result.error;
  }
}

TEST(C10dStore, NothingListeningIsRefusedWithTheAddress) {
  int port = 0;
  {
    LoopbackPeer closed([](int) {});
    port = closed.port();
  }
  StoreQueryRequest request;
  request.endpoint = {"127.0.0.1", port};
  request.keys = {"k"};
  const auto result = query_store(request);
  EXPECT_NE(
      result.error.find("cannot connect to the c10d store at 127.0.0.1:" + std::to_string(port)),
      std::string::npos)
      << result.error;
}

TEST(C10dStore, TooManyOrOversizedKeysAreRefusedBeforeConnecting) {
  StoreQueryRequest request;
  request.endpoint = {"127.0.0.1", 1};
  request.keys.assign(300, "k");
  EXPECT_NE(query_store(request).error.find("too many store keys"), std::string::npos);
  request.keys = {std::string(5000, 'k')};
  EXPECT_NE(query_store(request).error.find("5000 bytes"), std::string::npos);
}

TEST(C10dStore, EndpointComesFromMasterAddrAndPort) {
  EXPECT_EQ(store_endpoint({{"MASTER_ADDR", "198.51.100.1"}, {"MASTER_PORT", "29500"}}).text(),
            "198.51.100.1:29500");
  EXPECT_EQ(store_endpoint({{"MASTER_ADDR", "localhost"}, {"MASTER_PORT", "1"}}).text(),
            "127.0.0.1:1");
  EXPECT_EQ(store_endpoint({{"MASTER_ADDR", "[::1]"}, {"MASTER_PORT", "29500"}}).text(),
            "[::1]:29500");
  const auto error_of = [](const std::map<std::string, std::string>& env) {
    try {
      store_endpoint(env);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of({{"MASTER_PORT", "29500"}}), "MASTER_ADDR is not set");
  EXPECT_EQ(error_of({{"MASTER_ADDR", "10.0.0.1"}}), "MASTER_PORT is not set");
  EXPECT_EQ(error_of({{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "70000"}}),
            "MASTER_PORT 70000 is not a port number");
  EXPECT_NE(error_of({{"MASTER_ADDR", "no-such-host.invalid"}, {"MASTER_PORT", "1"}})
                .find("cannot be resolved"),
            std::string::npos);
}

TEST(C10dStore, ProtocolFollowsTheTorchVersionAndUnknownIsNotGuessed) {
  EXPECT_EQ(store_protocol_for("1.13.0"), StoreProtocol::kTorch1);
  EXPECT_EQ(store_protocol_for("1.13.1+cu117"), StoreProtocol::kTorch1);
  EXPECT_EQ(store_protocol_for("2.0.0"), StoreProtocol::kTorch2);
  EXPECT_EQ(store_protocol_for("2.9.0.dev20250801+cu128"), StoreProtocol::kTorch2);
  EXPECT_EQ(store_protocol_for(""), std::nullopt);
  EXPECT_EQ(store_protocol_for("unknown"), std::nullopt);
}

TEST(C10dStore, KeysAreReadFromPythonReprs) {
  EXPECT_EQ(model::keys_in_repr("'weights/1/ready'"), std::vector<std::string>{"weights/1/ready"});
  EXPECT_EQ(model::keys_in_repr("['arrive/0', 'arrive/1']"),
            (std::vector<std::string>{"arrive/0", "arrive/1"}));
  EXPECT_EQ(model::keys_in_repr("(\"it's\",)"), std::vector<std::string>{"it's"});
  EXPECT_EQ(model::keys_in_repr("'a\\'b'"), std::vector<std::string>{"a'b"});
  EXPECT_TRUE(model::keys_in_repr("<object at 0x7f>").empty());
  EXPECT_TRUE(model::keys_in_repr("42").empty());
}

}  // namespace
}  // namespace hangscope::collectives
