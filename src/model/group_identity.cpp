#include "hangscope/model/group_identity.h"

#include <optional>
#include <sstream>

#include "hangscope/common/address.h"
#include "hangscope/model/fact_keys.h"

namespace hangscope::model {
namespace {

// A store's host as a client reaches it through itself: loopback, or "any" (0.0.0.0, ::).
bool own_host(const std::string& host) {
  return is_loopback_host(host) || is_unspecified_ip(host);
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
        if (is_ip_literal(word) && !is_loopback_ip(word)) book.emplace(word, snapshot.node_name);
      }
    }
  }
  return book;
}

std::string group_store_key(const ProcessGroupState& group, std::string_view node,
                            const ProcessRecord& process, const AddressBook& book) {
  if (group.store.empty()) return "";
  if (group.store.rfind("file:", 0) == 0) return group.store;
  const HostPort store = split_endpoint(group.store);
  if (store.port.empty()) return "";
  std::string host = store.host;
  if (!is_ip_literal(host) || own_host(host)) {
    // The address this process connected to on the store's port, when it has one (its
    // sockets, else its net.tcp fact: tcp_connections).
    for (const auto& c : tcp_connections(process).value_or(std::vector<TcpConnection>{})) {
      const HostPort remote = split_endpoint(c.remote);
      if (c.state == SocketState::kEstablished && remote.port == store.port) {
        host = remote.host;
        break;
      }
    }
  }
  std::string server = host;
  if (own_host(host)) {
    server = std::string(node);
  } else if (const auto it = book.find(host); it != book.end()) {
    server = it->second;
  }
  std::string key = server + ":" + store.port;
  for (const auto& prefix : group.store_prefixes) key += "/" + prefix;
  return key;
}

}  // namespace hangscope::model
