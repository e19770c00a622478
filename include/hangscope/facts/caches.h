// Fingerprints of the caches that split ranks (FlashInfer's autotune cache under vLLM's cache
// root): files, sizes, SHA-256, mtimes, and which tp/ep ranks the stored keys serve.
#pragma once

#include <cstddef>
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

// vLLM's cache root for an environment: VLLM_CACHE_ROOT, else $XDG_CACHE_HOME/vllm, else
// $HOME/.cache/vllm ("" when none is known).
std::string vllm_cache_root(const std::map<std::string, std::string>& env);

// Where a rank's FlashInfer autotune cache lives: VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR, else
// VLLM_CACHE_ROOT/flashinfer_autotune_cache, else $XDG_CACHE_HOME/vllm/…, else ~/.cache/vllm/….
std::string flashinfer_autotune_dir(const std::map<std::string, std::string>& env);

// Every autotune_configs.json below `dir` (at most 64 files, 5 levels), read through `root`
// (the process's /proc/PID/root).
std::vector<CacheFile> flashinfer_autotune_files(const std::string& root, const std::string& dir);

// A rank's torch.compile cache in vLLM: CACHE_ROOT/torch_compile_cache/<hash>/rank_<r>_<dp>/.
// "warm" when its directory holds files, "cold" when no hash has one, "disabled" by
// VLLM_DISABLE_COMPILE_CACHE; which other ranks' directories exist tells whom the cache serves.
struct CompileCache {
  std::string state;     // warm | cold | disabled | absent (no torch_compile_cache at all)
  std::string rank_dir;  // "rank_3_0"
  std::size_t files = 0;
  std::uint64_t bytes = 0;
  std::int64_t newest_mtime_unix = 0;
  std::vector<std::string> hashes;        // the <hash> directories
  std::set<std::string> other_rank_dirs;  // "rank_0_0", … that exist under some hash
  std::string describe() const;
};
CompileCache torch_compile_cache(const std::string& root,
                                 const std::map<std::string, std::string>& env, int rank,
                                 int dp_rank);

// vLLM's GPU P2P access cache: CACHE_ROOT/gpu_p2p_access_cache_for_<devices>.json, a map
// "src->dst" → bool that vLLM trusts instead of testing P2P again.
struct P2pCacheFile {
  CacheFile file;
  std::vector<std::string> p2p_true, p2p_false;  // "0->1", …
  std::string describe() const;
};
std::vector<P2pCacheFile> gpu_p2p_cache_files(const std::string& root,
                                              const std::string& cache_root);

// Which tp_rank / ep_rank values a key names: "(… ('tp_rank', 2), ('ep_rank', 0)))" → 2, 0.
void ranks_in_cache_key(const std::string& key, std::set<int>& tp_ranks, std::set<int>& ep_ranks);

// SHA-256 of bytes, as lowercase hex.
std::string sha256_hex(const std::string& bytes);

}  // namespace hangscope::facts
