#include "hangscope/model/group_identity.h"

#include <arpa/inet.h>

#include <optional>
#include <sstream>

#include "hangscope/model/fact_keys.h"

namespace hangscope::model {
namespace {

struct Endpoint {
  std::string host;  // without IPv6 brackets
  std::string port;
};

std::optional<Endpoint> split_endpoint(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size()) return std::nullopt;
  std::string host(text.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return Endpoint{host, std::string(text.substr(colon + 1))};
}

bool numeric_address(const std::string& host) {
  unsigned char buffer[16];
  return inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

bool unspecified(const std::string& host) {
  return host == "0.0.0.0" || host == "::";
}

bool loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1" ||
         host.rfind("::ffff:127.", 0) == 0;
}

}  // namespace

AddressBook address_book(const Bundle& bundle) {
  AddressBook book;
  for (const auto& snapshot : bundle.snapshots) {
    for (const auto& p : snapshot.processes) {
      const auto it = p.facts.find(fact_keys::kNetInterfaces);
      if (it == p.facts.end()) continue;
      std::istringstream words(it->second);  // "lo 127.0.0.1 ::1, eth0 192.0.2.2 fd00::2"
      for (std::string word; words >> word;) {
        if (!word.empty() && word.back() == ',') word.pop_back();
        if (numeric_address(word) && !loopback(word)) book.emplace(word, snapshot.node_name);
      }
    }
  }
  return book;
}

std::string group_store_key(const ProcessGroupState& group, std::string_view node,
                            const ProcessRecord& process, const AddressBook& book) {
  if (group.store.empty()) return "";
  if (group.store.rfind("file:", 0) == 0) return group.store;
  const auto store = split_endpoint(group.store);
  if (!store) return "";
  std::string host = store->host;
  if (!numeric_address(host) || unspecified(host) || loopback(host)) {
    // The address this process connected to on the store's port, when it has one (its
    // sockets, else its net.tcp fact: tcp_connections).
    for (const auto& c : tcp_connections(process).value_or(std::vector<TcpConnection>{})) {
      const auto remote = split_endpoint(c.remote);
      if (c.state == SocketState::kEstablished && remote && remote->port == store->port) {
        host = remote->host;
        break;
      }
    }
  }
  std::string server = host;
  if (loopback(host) || unspecified(host)) {
    server = std::string(node);
  } else if (const auto it = book.find(host); it != book.end()) {
    server = it->second;
  }
  std::string key = server + ":" + store->port;
  for (const auto& prefix : group.store_prefixes) key += "/" + prefix;
  return key;
}

}  // namespace hangscope::model
