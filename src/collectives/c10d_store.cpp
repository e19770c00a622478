#include "hangscope/collectives/c10d_store.h"

#include <netdb.h>
#include <re2/re2.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>

#include "hangscope/common/error.h"
#include "hangscope/common/tcp_connection.h"
#include "hangscope/model/package_version.h"
#include "hangscope/model/store_keys.h"

namespace hangscope::collectives {
namespace {

constexpr std::size_t kMaxKeyBytes = 4096;
constexpr std::uint64_t kMaxCounterBytes = 64;
constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;  // torch >= 2.0, TCPStoreBackend.hpp

// The query numbers of each protocol (TCPStore's QueryType) for the two queries sent here.
struct QueryNumbers {
  std::uint8_t get;
  std::uint8_t check;
};
constexpr QueryNumbers kTorch1Queries{2, 4};  // SET, COMPARE_SET, GET, ADD, CHECK, …
constexpr QueryNumbers kTorch2Queries{3, 5};  // VALIDATE, SET, COMPARE_SET, GET, ADD, CHECK, …
constexpr std::uint8_t kValidate = 0;         // torch >= 2.0 only
constexpr std::uint8_t kCheckReady = 0;       // CheckResponseType::READY
constexpr std::uint8_t kCheckNotReady = 1;
// TCPStore itself puts every key under "/" (its keyPrefix_), below any PrefixStore's prefix.
constexpr const char* kStoreRoot = "/";

// TCPStore's framing: native-endian fixed-size values and strings as a 64-bit length + bytes
// (every platform torch runs its store on is little-endian).
template <typename T>
void append_value(std::string& out, T value) {
  char bytes[sizeof value];
  std::memcpy(bytes, &value, sizeof value);
  out.append(bytes, sizeof value);
}

void append_string(std::string& out, const std::string& s) {
  append_value<std::uint64_t>(out, s.size());
  out += s;
}

class StoreClient {
 public:
  explicit StoreClient(const StoreQueryRequest& request)
      : connection_(request.endpoint.host, request.endpoint.port,
                    TcpConnection::Clock::now() + request.timeout, "the c10d store"),
        numbers_(request.protocol == StoreProtocol::kTorch1 ? kTorch1Queries : kTorch2Queries) {
    if (request.protocol == StoreProtocol::kTorch2) {
      std::string hello;
      append_value<std::uint8_t>(hello, kValidate);
      append_value<std::uint32_t>(hello, kValidationMagic);
      connection_.send(hello, "sending VALIDATE");
    }
  }

  bool exists(const std::string& key) {
    std::string message;
    append_value<std::uint8_t>(message, numbers_.check);
    append_value<std::uint64_t>(message, 1);
    append_string(message, key);
    connection_.send(message, "sending CHECK " + key);
    const auto reply = static_cast<std::uint8_t>(connection_.receive_exact(1, "CHECK " + key)[0]);
    if (reply != kCheckReady && reply != kCheckNotReady) {
      throw Error("the c10d store answered CHECK " + key + " with " + std::to_string(reply) +
                  " (neither READY nor NOT_READY: another protocol?)");
    }
    return reply == kCheckReady;
  }

  // Only for a key `exists` just found: the server answers at once.
  std::string counter(const std::string& key) {
    std::string message;
    append_value<std::uint8_t>(message, numbers_.get);
    append_string(message, key);
    connection_.send(message, "sending GET " + key);
    std::uint64_t size = 0;
    const auto header = connection_.receive_exact(sizeof size, "GET " + key);
    std::memcpy(&size, header.data(), sizeof size);
    if (size > kMaxCounterBytes) {
      throw Error("the c10d store's value of " + key + " is " + std::to_string(size) +
                  " bytes: not a counter");
    }
    const auto value = connection_.receive_exact(size, "GET " + key);
    static const RE2 decimal(R"(-?\d{1,19})");
    if (!RE2::FullMatch(value, decimal)) return "(not a number)";
    return value;
  }

 private:
  TcpConnection connection_;
  QueryNumbers numbers_;
};

void check_request(const StoreQueryRequest& request) {
  if (request.keys.size() + request.counter_keys.size() > model::kMaxStoreKeys) {
    throw Error("too many store keys to check (" +
                std::to_string(request.keys.size() + request.counter_keys.size()) + ", at most " +
                std::to_string(model::kMaxStoreKeys) + ")");
  }
  for (const auto* list : {&request.keys, &request.counter_keys}) {
    for (const auto& key : *list) {
      if (key.empty() || key.size() > kMaxKeyBytes) {
        throw Error("store key of " + std::to_string(key.size()) + " bytes: not checked");
      }
    }
  }
}

// Every key under every prefix; the prefix with the most keys present wins (the first on a tie).
StoreQuery run_query(const StoreQueryRequest& request) {
  StoreQuery result;
  result.endpoint = request.endpoint.text();
  check_request(request);
  StoreClient client(request);
  std::vector<std::string> all = request.keys;
  all.insert(all.end(), request.counter_keys.begin(), request.counter_keys.end());
  std::size_t best_count = 0;
  std::vector<bool> best(all.size(), false);
  const std::vector<std::string> prefixes =
      request.prefixes.empty() ? std::vector<std::string>{""} : request.prefixes;
  result.prefix = prefixes.front();
  for (const auto& prefix : prefixes) {
    std::vector<bool> present(all.size(), false);
    std::size_t count = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      present[i] = client.exists(kStoreRoot + prefix + all[i]);
      count += present[i] ? 1 : 0;
    }
    if (count > best_count) {
      best_count = count;
      best = present;
      result.prefix = prefix;
    }
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    StoreKeyState state{all[i], best[i], i >= request.keys.size(), std::nullopt};
    if (state.counter && state.present) {
      state.value = client.counter(kStoreRoot + result.prefix + all[i]);
    }
    result.keys.push_back(std::move(state));
  }
  return result;
}

std::string resolve(const std::string& name) {
  if (name == "localhost") return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &found); rc != 0) {
    throw Error("MASTER_ADDR " + name + " cannot be resolved: " + ::gai_strerror(rc));
  }
  char text[NI_MAXHOST] = {};
  const int rc = ::getnameinfo(found->ai_addr, found->ai_addrlen, text, sizeof text, nullptr, 0,
                               NI_NUMERICHOST);
  ::freeaddrinfo(found);
  if (rc != 0) throw Error("MASTER_ADDR " + name + ": " + ::gai_strerror(rc));
  return text;
}

}  // namespace

std::string StoreEndpoint::text() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

StoreEndpoint store_endpoint(const std::map<std::string, std::string>& env) {
  const auto addr = env.find("MASTER_ADDR");
  const auto port = env.find("MASTER_PORT");
  if (addr == env.end() || addr->second.empty()) throw Error("MASTER_ADDR is not set");
  if (port == env.end() || port->second.empty()) throw Error("MASTER_PORT is not set");
  static const RE2 number(R"(\d{1,5})");
  if (!RE2::FullMatch(port->second, number) || std::stoi(port->second) == 0 ||
      std::stoi(port->second) > 65535) {
    throw Error("MASTER_PORT " + port->second + " is not a port number");
  }
  std::string host = addr->second;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {resolve(host), std::stoi(port->second)};
}

std::optional<StoreProtocol> store_protocol_for(const std::string& torch_version) {
  // Starts like a release, "\d+\.\d": without std::regex, which recursed once per digit.
  const auto digit = [&](std::size_t i) {
    return i < torch_version.size() && std::isdigit(static_cast<unsigned char>(torch_version[i]));
  };
  std::size_t i = 0;
  while (digit(i)) ++i;
  if (i == 0 || i >= torch_version.size() || torch_version[i] != '.' || !digit(i + 1)) {
    return std::nullopt;
  }
  return model::compare_versions(torch_version, "2.0.0a0") < 0 ? StoreProtocol::kTorch1
                                                               : StoreProtocol::kTorch2;
}

std::vector<std::string> StoreQuery::missing() const {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (!k.present && !k.counter) out.push_back(k.key);
  }
  return out;
}

std::string StoreQuery::describe() const {
  if (!error.empty()) return "query failed: " + error;
  std::size_t awaited = 0, present = 0;
  std::string counters, missing_keys;
  for (const auto& k : keys) {
    if (k.counter) {
      counters += "; counter " + k.key + (k.value ? " = " + *k.value : " does not exist");
      continue;
    }
    ++awaited;
    if (k.present) {
      ++present;
    } else {
      missing_keys += (missing_keys.empty() ? "" : ", ") + k.key;
    }
  }
  std::string out = endpoint + ": ";
  if (awaited > 0) {
    out += std::to_string(present) + " of " + std::to_string(awaited) + " awaited keys exist";
  } else {
    out += "no awaited keys";
  }
  if (present > 0 || std::any_of(keys.begin(), keys.end(),
                                 [](const StoreKeyState& k) { return k.counter && k.present; })) {
    out += " (" + (prefix.empty() ? std::string("no prefix") : "prefix " + prefix) + ")";
  } else if (awaited > 0) {
    out += " (under no prefix tried)";
  }
  if (!missing_keys.empty()) out += "; missing: " + missing_keys;
  return out + counters;
}

StoreQuery query_store(const StoreQueryRequest& request) {
  StoreQuery result;
  const std::string outside =
      run_in_network_namespace(request.netns_pid, [&] { result = run_query(request); });
  if (!outside.empty()) {
    result = StoreQuery{};
    result.endpoint = request.endpoint.text();
    result.error = outside;
  }
  return result;
}

}  // namespace hangscope::collectives
