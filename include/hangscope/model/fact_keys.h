// The names of the facts a capture records for a process (ProcessRecord::facts), in one place:
// writers and readers (analysis, rules, report) spell each key through these constants, and
// `is_known_fact_key` tells a rule that names a fact hangscope never writes. docs/rules.md
// lists them for rule authors.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace hangscope::model::fact_keys {

// Package versions: "version." + the normalized package name ("version.torch", "version.vllm").
inline constexpr std::string_view kVersionPrefix = "version.";
inline constexpr char kVersionPython[] = "version.python";
inline constexpr char kVersionTorch[] = "version.torch";
inline constexpr char kVersionNccl[] = "version.nccl";
std::string version(std::string_view package);

// /dev/shm in the process's mount namespace.
inline constexpr char kShm[] = "shm";  // for people: "12 MiB free of 64 MiB"
inline constexpr char kShmSizeBytes[] = "shm.size_bytes";
inline constexpr char kShmFreeBytes[] = "shm.free_bytes";

// Caches: vLLM's root, torch inductor's, torch.compile's, and the files FlashInfer's autotuner
// and vLLM's GPU P2P check leave ("cache.flashinfer_autotune[0]", "[1]", …).
inline constexpr char kCacheVllmRoot[] = "cache.vllm_root";
inline constexpr char kCacheInductorDir[] = "cache.inductor_dir";
inline constexpr char kCacheTorchCompile[] = "cache.torch_compile";
inline constexpr char kCacheTorchCompileState[] = "cache.torch_compile.state";
inline constexpr std::string_view kCacheFlashinferAutotune = "cache.flashinfer_autotune";
inline constexpr std::string_view kCacheGpuP2p = "cache.gpu_p2p";
std::string indexed(std::string_view list, std::size_t index);  // "LIST[INDEX]"

// The node's GPUs.
inline constexpr char kGpuCount[] = "gpu.count";
inline constexpr char kGpuSource[] = "gpu.source";
inline constexpr char kGpuModel[] = "gpu.model";
inline constexpr char kGpuComputeCapability[] = "gpu.compute_capability";
inline constexpr char kGpuDriver[] = "gpu.driver";
inline constexpr char kGpuNvlink[] = "gpu.nvlink";
inline constexpr char kGpuNvswitch[] = "gpu.nvswitch";
inline constexpr char kGpuLinks[] = "gpu.links";
inline constexpr char kGpuNotes[] = "gpu.notes";

// The process's network: interfaces, its own sockets, and the checks of the variables that
// choose an interface or an address ("net.GLOO_SOCKET_IFNAME", "net.VLLM_HOST_IP").
inline constexpr char kNetInterfaces[] = "net.interfaces";
inline constexpr char kNetListening[] = "net.listening";
inline constexpr char kNetConnections[] = "net.connections";
inline constexpr char kNetTcp[] = "net.tcp";
inline constexpr char kNetTcpTruncated[] = "net.tcp.truncated";
inline constexpr char kNetStore[] = "net.store";
inline constexpr char kNetNotes[] = "net.notes";
inline constexpr std::string_view kNetVariablePrefix = "net.";
inline constexpr const char* kNetCheckedVariables[] = {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME",
                                                       "VLLM_HOST_IP"};
std::string net_variable(std::string_view variable);  // "net." + variable

// Collective state: the flight-recorder trigger, the c10d store query, vLLM's shm broadcast
// ring, NCCL RAS.
inline constexpr char kFlightRecorderTrigger[] = "flight_recorder.trigger";
inline constexpr char kStoreQuery[] = "store.query";
inline constexpr char kStoreMissingKeys[] = "store.missing_keys";
inline constexpr char kShmRing[] = "shm_ring";
inline constexpr char kShmRingLaggingRanks[] = "shm_ring.lagging_ranks";
inline constexpr char kShmRingWriterRank[] = "shm_ring.writer_rank";
// For code: "ok" (kShmRing describes the ring) | "unrecognised" (kShmRing says why not).
inline constexpr char kShmRingStatus[] = "shm_ring.status";
inline constexpr char kNcclRas[] = "nccl_ras";               // for people: the summary
inline constexpr char kNcclRasStatus[] = "nccl_ras.status";  // ok | problems | unavailable
inline constexpr char kNcclRasReport[] = "nccl_ras.report";

// Whether `key` is one hangscope writes: one of the names above, "version.PACKAGE",
// "cache.flashinfer_autotune[N]" / "cache.gpu_p2p[N]" (or the list name with "[*]", as rules
// write it), or "net.VARIABLE" of a checked variable.
bool is_known_fact_key(std::string_view key);
// Whether some key hangscope writes starts with `prefix` (a rule's show_facts: "cache.gpu_p2p"
// shows every "cache.gpu_p2p[N]").
bool is_known_fact_prefix(std::string_view prefix);

}  // namespace hangscope::model::fact_keys

namespace hangscope::model {

// What RAS said on a rank's node, for code: the value of the fact fact_keys::kNcclRasStatus.
enum class RasStatus {
  kOk,           // a report without findings (which is no proof: RAS says OK in some hangs)
  kProblems,     // a report with findings
  kUnavailable,  // no report: RAS could not be asked
};
std::string_view to_string(RasStatus status);  // "ok" | "problems" | "unavailable"
// The status a fact value names; nullopt for any other value.
std::optional<RasStatus> ras_status_from_string(std::string_view value);

// Whether the broadcast ring a process maps was read: the fact fact_keys::kShmRingStatus.
enum class ShmRingStatus {
  kOk,            // fact_keys::kShmRing describes the ring
  kUnrecognised,  // it is no ring this version reads; kShmRing says why
};
std::string_view to_string(ShmRingStatus status);  // "ok" | "unrecognised"
// The status of the ring in `facts`: the status fact; without it (snapshots before 2.4, which
// wrote the reason in kShmRing alone), read from kShmRing as those versions wrote it; nullopt
// when no ring fact is there.
std::optional<ShmRingStatus> shm_ring_status(const std::map<std::string, std::string>& facts);

}  // namespace hangscope::model
