// Fuzz target: the pure parts of the c10d store client, which read text from a rank: the store
// keys named by a local's repr (collectives::keys_in_repr, as capture and the wait-for graph
// use it on `key`/`keys` locals) and the torch version that selects the wire protocol
// (collectives::store_protocol_for, facts::compare_versions). The store's replies are read
// inside a TCP exchange (StoreClient), not by a function of bytes: not fuzzed here.
// Input: the repr; the text up to its first newline is also taken as a torch version, and
// compared with the rest.
#include "fuzz_support.h"
#include "hangscope/collectives/c10d_store.h"
#include "hangscope/facts/versions.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hangscope;
  const std::string text = fuzz::input(data, size);
  for (const auto& key : collectives::keys_in_repr(text)) {
    if (key.empty()) __builtin_trap();  // documented: no empty keys
  }
  const auto newline = text.find('\n');
  const std::string version = text.substr(0, newline);
  (void)collectives::store_protocol_for(version);
  if (newline != std::string::npos) {
    const std::string other = text.substr(newline + 1);
    const int ab = facts::compare_versions(version, other);
    const int ba = facts::compare_versions(other, version);
    if (ab != -ba) __builtin_trap();  // an order must be antisymmetric
  }
  return 0;
}
