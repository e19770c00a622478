// Read-only questions to a torch.distributed c10d TCPStore: which of the keys a rank waits for
// exist (CHECK), and the value of a barrier counter that CHECK found. Nothing else is ever
// sent: no SET, ADD, DELETE, WAIT, and no GET of a key that might not exist (a blocking get).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hangscope::collectives {

struct StoreEndpoint {
  std::string host;  // an IP address
  int port = 0;
  std::string text() const;  // "198.51.100.1:29500"
};

// MASTER_ADDR / MASTER_PORT of a rank's environment; a name is resolved here ("localhost" is
// 127.0.0.1). Throws Error naming the variable and the reason when they are absent or bad.
StoreEndpoint store_endpoint(const std::map<std::string, std::string>& env);

// The store's wire protocol: torch < 2.0 numbers its queries from SET = 0 and has no
// handshake; torch >= 2.0 validates each client first (VALIDATE = 0 with a magic number) and
// numbers SET = 1 … CHECK = 5. Nullopt for a version this cannot tell (then nothing is sent:
// a query in the wrong numbering could be taken for a write).
enum class StoreProtocol { kTorch1, kTorch2 };
std::optional<StoreProtocol> store_protocol_for(const std::string& torch_version);

struct StoreQueryRequest {
  StoreEndpoint endpoint;
  StoreProtocol protocol = StoreProtocol::kTorch2;
  std::vector<std::string> keys;          // awaited keys: checked
  std::vector<std::string> counter_keys;  // barrier counters: checked, value read if present
  // Where a PrefixStore may have put them ("default_pg/" is init_process_group's); the
  // prefix under which the most keys exist is taken.
  std::vector<std::string> prefixes = {"", "default_pg/"};
  std::chrono::milliseconds timeout{2000};  // the whole exchange
  pid_t netns_pid = 0;                      // connect from this process's network namespace
};

struct StoreKeyState {
  std::string key;  // as the rank names it (without the prefix)
  bool present = false;
  bool counter = false;              // a barrier counter (counter_keys), not an awaited key
  std::optional<std::string> value;  // a counter that exists: its decimal count
};

struct StoreQuery {
  std::string endpoint;
  std::string prefix;  // the prefix the keys were found under
  std::vector<StoreKeyState> keys;
  std::string error;  // why the query failed ("" on success)

  std::vector<std::string> missing() const;  // awaited keys (not counters) that do not exist
  // "127.0.0.1:29500: 3 of 4 awaited keys exist (prefix default_pg/); missing: arrive/2"
  std::string describe() const;
};

StoreQuery query_store(const StoreQueryRequest& request);

}  // namespace hangscope::collectives
