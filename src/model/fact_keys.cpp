#include "hangscope/model/fact_keys.h"

#include <algorithm>
#include <iterator>

namespace hangscope::model::fact_keys {
namespace {

constexpr std::string_view kPlainKeys[] = {kVersionPython,
                                           kVersionTorch,
                                           kVersionNccl,
                                           kShm,
                                           kShmSizeBytes,
                                           kShmFreeBytes,
                                           kCacheVllmRoot,
                                           kCacheInductorDir,
                                           kCacheTorchCompile,
                                           kCacheTorchCompileState,
                                           kGpuCount,
                                           kGpuSource,
                                           kGpuModel,
                                           kGpuComputeCapability,
                                           kGpuDriver,
                                           kGpuNvlink,
                                           kGpuNvswitch,
                                           kGpuLinks,
                                           kGpuNotes,
                                           kNetInterfaces,
                                           kNetListening,
                                           kNetConnections,
                                           kNetTcp,
                                           kNetTcpTruncated,
                                           kNetStore,
                                           kNetNotes,
                                           kFlightRecorderTrigger,
                                           kStoreQuery,
                                           kStoreMissingKeys,
                                           kShmRing,
                                           kShmRingLaggingRanks,
                                           kShmRingWriterRank,
                                           kShmRingStatus,
                                           kNcclRas,
                                           kNcclRasStatus,
                                           kNcclRasReport};

// "LIST[N]" or "LIST[*]" of an indexed list.
bool is_indexed(std::string_view key, std::string_view list) {
  if (key.size() < list.size() + 3 || key.substr(0, list.size()) != list) return false;
  const auto index = key.substr(list.size());
  if (index.front() != '[' || index.back() != ']') return false;
  const auto digits = index.substr(1, index.size() - 2);
  return digits == "*" ||
         std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string version(std::string_view package) {
  return std::string(kVersionPrefix) + std::string(package);
}

std::string indexed(std::string_view list, std::size_t index) {
  return std::string(list) + "[" + std::to_string(index) + "]";
}

std::string net_variable(std::string_view variable) {
  return std::string(kNetVariablePrefix) + std::string(variable);
}

bool is_known_fact_key(std::string_view key) {
  if (std::find(std::begin(kPlainKeys), std::end(kPlainKeys), key) != std::end(kPlainKeys))
    return true;
  if (key.size() > kVersionPrefix.size() && key.substr(0, kVersionPrefix.size()) == kVersionPrefix)
    return true;
  if (is_indexed(key, kCacheFlashinferAutotune) || is_indexed(key, kCacheGpuP2p)) return true;
  for (const char* variable : kNetCheckedVariables) {
    if (key == net_variable(variable)) return true;
  }
  return false;
}

bool is_known_fact_prefix(std::string_view prefix) {
  if (prefix.empty()) return false;
  const auto starts = [&](std::string_view key) { return key.substr(0, prefix.size()) == prefix; };
  if (std::any_of(std::begin(kPlainKeys), std::end(kPlainKeys), starts)) return true;
  for (const auto list : {kVersionPrefix, kCacheFlashinferAutotune, kCacheGpuP2p}) {
    if (starts(list)) return true;
  }
  return is_known_fact_key(prefix) || prefix.substr(0, kVersionPrefix.size()) == kVersionPrefix;
}

}  // namespace hangscope::model::fact_keys

namespace hangscope::model {

std::string_view to_string(RasStatus status) {
  switch (status) {
    case RasStatus::kOk:
      return "ok";
    case RasStatus::kProblems:
      return "problems";
    case RasStatus::kUnavailable:
      return "unavailable";
  }
  return "unavailable";
}

std::string_view to_string(ShmRingStatus status) {
  return status == ShmRingStatus::kOk ? "ok" : "unrecognised";
}

std::optional<ShmRingStatus> shm_ring_status(const std::map<std::string, std::string>& facts) {
  const auto ring = facts.find(fact_keys::kShmRing);
  if (ring == facts.end()) return std::nullopt;
  const auto status = facts.find(fact_keys::kShmRingStatus);
  if (status != facts.end()) {
    return status->second == to_string(ShmRingStatus::kOk) ? ShmRingStatus::kOk
                                                           : ShmRingStatus::kUnrecognised;
  }
  // Migration: before 2.4 the only record of an unread ring was this prefix of its text.
  return ring->second.rfind("not recognised", 0) == 0 ? ShmRingStatus::kUnrecognised
                                                      : ShmRingStatus::kOk;
}

std::optional<RasStatus> ras_status_from_string(std::string_view value) {
  for (const auto status : {RasStatus::kOk, RasStatus::kProblems, RasStatus::kUnavailable}) {
    if (value == to_string(status)) return status;
  }
  return std::nullopt;
}

}  // namespace hangscope::model
