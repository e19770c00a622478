// Fuzz target: the pure parts of the c10d store client, which read text from a rank: the store
// keys named by a local's repr (model::keys_in_repr, as capture and the wait-for graph
// use it on `key`/`keys` locals) and the torch version that selects the wire protocol
// (collectives::store_protocol_for, model::compare_versions). The store's replies are read
// inside a TCP exchange (StoreClient), not by a function of bytes: not fuzzed here.
// Input: the repr; the text up to its first newline is also taken as a torch version, and
// compared with the rest. Both parsers replaced std::regex searches (which recursed once per
// character); on inputs short enough for std::regex they must still give what it gave.
#include <regex>

#include "fuzz_support.h"
#include "hangscope/collectives/c10d_store.h"
#include "hangscope/facts/versions.h"
#include "hangscope/model/package_version.h"
#include "hangscope/model/store_keys.h"

namespace {

// keys_in_repr as it was, with std::regex.
std::vector<std::string> keys_by_regex(const std::string& repr) {
  std::vector<std::string> keys;
  static const std::regex quoted(R"re('((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")re");
  for (auto it = std::sregex_iterator(repr.begin(), repr.end(), quoted);
       it != std::sregex_iterator() && keys.size() < 256; ++it) {
    std::string key = (*it)[1].matched ? (*it)[1].str() : (*it)[2].str();
    std::string plain;
    for (std::size_t i = 0; i < key.size(); ++i) {
      if (key[i] == '\\' && i + 1 < key.size() &&
          (key[i + 1] == '\\' || key[i + 1] == '\'' || key[i + 1] == '"')) {
        ++i;
      }
      plain += key[i];
    }
    if (!plain.empty()) keys.push_back(plain);
  }
  return keys;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hangscope;
  const std::string text = fuzz::input(data, size);
  const auto keys = model::keys_in_repr(text);
  for (const auto& key : keys) {
    if (key.empty()) __builtin_trap();  // documented: no empty keys
  }
  const auto newline = text.find('\n');
  const std::string version = text.substr(0, newline);
  const auto protocol = collectives::store_protocol_for(version);
  // The oracle recurses once per character: 1 KiB fits the stack of an -O0 ASan build too
  // (regressions/c10d_store/regex-oracle-overflow-O0, 2,763 bytes, overflowed it at 4 KiB).
  if (text.size() <= 1024) {
    if (keys != keys_by_regex(text)) __builtin_trap();
    static const std::regex release(R"(^\d+\.\d+)");
    if (protocol.has_value() != std::regex_search(version, release)) __builtin_trap();
  }
  if (newline != std::string::npos) {
    const std::string other = text.substr(newline + 1);
    const int ab = model::compare_versions(version, other);
    const int ba = model::compare_versions(other, version);
    if (ab != -ba) __builtin_trap();  // an order must be antisymmetric
  }
  return 0;
}
