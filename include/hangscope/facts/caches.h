// Fingerprints of the caches that split ranks (FlashInfer's autotune cache under vLLM's cache
// root): files, sizes, SHA-256, mtimes, and which tp/ep ranks the stored keys serve.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace hangscope::facts {

struct CacheFile {
  std::string path;  // as the process sees it
  std::uint64_t size = 0;
  std::string sha256;  // hex
  std::int64_t mtime_unix = 0;
  std::size_t entries = 0;  // keys, reserved ones (_metadata, …) excluded
  std::set<int> tp_ranks, ep_ranks;
  std::string error;  // why it could not be read or parsed ("" when fine)
  std::string describe() const;
};

// Where a rank's FlashInfer autotune cache lives: VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR, else
// VLLM_CACHE_ROOT/flashinfer_autotune_cache, else $XDG_CACHE_HOME/vllm/…, else ~/.cache/vllm/….
std::string flashinfer_autotune_dir(const std::map<std::string, std::string>& env);

// Every autotune_configs.json below `dir` (at most 64 files, 5 levels), read through `root`
// (the process's /proc/PID/root).
std::vector<CacheFile> flashinfer_autotune_files(const std::string& root, const std::string& dir);

// Which tp_rank / ep_rank values a key names: "(… ('tp_rank', 2), ('ep_rank', 0)))" → 2, 0.
void ranks_in_cache_key(const std::string& key, std::set<int>& tp_ranks, std::set<int>& ep_ranks);

// SHA-256 of bytes, as lowercase hex.
std::string sha256_hex(const std::string& bytes);

}  // namespace hangscope::facts
