#include "hangscope/facts/caches.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/common/bounded_json.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/numbers.h"

namespace hangscope::facts {
namespace {

constexpr std::size_t kMaxFiles = 64;
constexpr int kMaxDepth = 5;
constexpr std::size_t kMaxFileBytes = 16u << 20;
constexpr std::size_t kMaxWalkedFiles = 4096;

// A cache file is JSON a rank (or anyone who can write its cache directory) wrote, read by the
// agent: only its top-level members are used, so what is below them is parsed but not built,
// and depth and size are bounded (docs/security.md, "Amplification").
constexpr JsonLimits kCacheJson{64, 1u << 20, 64u << 20};
bool top_level_only(const std::vector<std::string>& path) {
  return path.size() < 2;
}

void find_files(const std::string& root, const std::string& dir, int depth,
                std::vector<std::string>& out) {
  if (depth > kMaxDepth || out.size() >= kMaxFiles) return;
  const auto names = list_directory(root + dir);
  if (!names) return;
  for (const auto& name : *names) {
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::lstat((root + path).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      find_files(root, path, depth + 1, out);
    } else if (S_ISREG(st.st_mode) && name == "autotune_configs.json" && out.size() < kMaxFiles) {
      out.push_back(path);
    }
  }
}

// Calls `visit` with the stat of every regular file below `dir` (bounded depth and count).
template <typename Visit>
void walk_files(const std::string& dir, int depth, Visit&& visit, std::size_t* seen = nullptr) {
  std::size_t local = 0;
  if (seen == nullptr) seen = &local;
  if (depth > kMaxDepth) return;
  for (const auto& name : list_directory(dir).value_or(std::vector<std::string>{})) {
    if (*seen >= kMaxWalkedFiles) return;
    struct stat st {};
    if (::lstat((dir + "/" + name).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      walk_files(dir + "/" + name, depth + 1, visit, seen);
    } else if (S_ISREG(st.st_mode)) {
      ++*seen;
      visit(st);
    }
  }
}

// A cache file of a rank's root: a regular file, no link (which would have root read a file
// outside the cache), never a FIFO or device. Its text, or nullopt.
std::optional<std::string> read_in_root(const std::string& root, const std::string& path,
                                        struct stat* st = nullptr) {
  const OpenedFile opened =
      open_regular_file(root + path, "cache file", {Links::kRefuse, std::nullopt});
  if (st != nullptr && opened.ok()) *st = opened.st;
  return read_opened_file(opened, kMaxFileBytes).text;
}

CacheFile read_cache_file(const std::string& root, const std::string& path) {
  CacheFile file;
  file.path = path;
  struct stat st {};
  const auto text = read_in_root(root, path, &st);
  if (!text) {
    file.error = "cannot be read";
    return file;
  }
  file.size = static_cast<std::uint64_t>(st.st_size);
  file.mtime_unix = st.st_mtim.tv_sec;
  file.sha256 = sha256_hex(*text);
  try {
    const auto doc = parse_json_within(*text, kCacheJson, top_level_only);
    for (const auto& [key, value] : doc.items()) {
      if (!key.empty() && key.front() == '_') continue;  // _metadata, _generation, _records
      ++file.entries;
      ranks_in_cache_key(key, file.tp_ranks, file.ep_ranks);
    }
  } catch (const nlohmann::json::exception&) {
    file.error = "not JSON";
  } catch (const Error& e) {
    file.error = std::string("refused: ") + e.what();
  }
  return file;
}

std::string join_ranks(const std::set<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

}  // namespace

std::string CacheFile::describe() const {
  std::string out = path + ": " + std::to_string(size) + " bytes";
  if (!sha256.empty()) out += ", sha256 " + sha256.substr(0, 16);
  out += ", mtime " + std::to_string(mtime_unix);
  if (!error.empty()) return out + ", " + error;
  out += ", " + std::to_string(entries) + " entries";
  if (!tp_ranks.empty()) out += ", keys for tp_rank " + join_ranks(tp_ranks);
  if (!ep_ranks.empty()) out += ", ep_rank " + join_ranks(ep_ranks);
  return out;
}

std::string vllm_cache_root(const std::map<std::string, std::string>& env) {
  const auto get = [&](const char* name) {
    const auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  if (auto root = get("VLLM_CACHE_ROOT"); !root.empty()) return root;
  if (auto xdg = get("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/vllm";
  if (auto home = get("HOME"); !home.empty()) return home + "/.cache/vllm";
  return "";
}

std::string flashinfer_autotune_dir(const std::map<std::string, std::string>& env) {
  if (const auto it = env.find("VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR");
      it != env.end() && !it->second.empty()) {
    return it->second;
  }
  const std::string root = vllm_cache_root(env);
  return root.empty() ? "" : root + "/flashinfer_autotune_cache";
}

std::vector<CacheFile> flashinfer_autotune_files(const std::string& root, const std::string& dir) {
  std::vector<CacheFile> out;
  if (dir.empty() || dir.front() != '/') return out;
  std::vector<std::string> paths;
  find_files(root, dir, 0, paths);
  for (const auto& p : paths) out.push_back(read_cache_file(root, p));
  return out;
}

std::string CompileCache::describe() const {
  std::string out = state;
  if (state == "warm") {
    out += ": " + rank_dir + " holds " + std::to_string(files) + " files, " +
           std::to_string(bytes) + " bytes, newest mtime " + std::to_string(newest_mtime_unix);
  } else if (state == "cold") {
    out += ": no " + rank_dir + " directory";
  }
  if (!hashes.empty()) {
    out += " (hashes";
    for (const auto& h : hashes) out += " " + h;
    out += ")";
  }
  if (!other_rank_dirs.empty()) {
    out += "; other ranks' directories:";
    for (const auto& d : other_rank_dirs) out += " " + d;
  }
  return out;
}

CompileCache torch_compile_cache(const std::string& root,
                                 const std::map<std::string, std::string>& env, int rank,
                                 int dp_rank) {
  CompileCache cache;
  cache.rank_dir = "rank_" + std::to_string(rank) + "_" + std::to_string(dp_rank);
  if (const auto it = env.find("VLLM_DISABLE_COMPILE_CACHE");
      it != env.end() && it->second == "1") {
    cache.state = "disabled";
    return cache;
  }
  const std::string cache_root = vllm_cache_root(env);
  const auto hashes = cache_root.empty() || cache_root.front() != '/'
                          ? std::nullopt
                          : list_directory(root + cache_root + "/torch_compile_cache");
  if (!hashes) {
    cache.state = "absent";
    return cache;
  }
  cache.state = "cold";
  for (const auto& hash : *hashes) {
    const std::string hash_dir = cache_root + "/torch_compile_cache/" + hash;
    const auto ranks = list_directory(root + hash_dir);
    if (!ranks) continue;
    cache.hashes.push_back(hash);
    for (const auto& dir : *ranks) {
      if (dir.rfind("rank_", 0) != 0) continue;
      if (dir != cache.rank_dir) {
        cache.other_rank_dirs.insert(dir);
        continue;
      }
      walk_files(root + hash_dir + "/" + dir, 0, [&](const struct stat& st) {
        ++cache.files;
        cache.bytes += static_cast<std::uint64_t>(st.st_size);
        cache.newest_mtime_unix =
            std::max<std::int64_t>(cache.newest_mtime_unix, st.st_mtim.tv_sec);
      });
    }
  }
  if (cache.files > 0) cache.state = "warm";
  return cache;
}

std::string P2pCacheFile::describe() const {
  std::string out = file.describe();
  if (!file.error.empty()) return out;
  out += "; P2P believed available for " + std::to_string(p2p_true.size()) + " of " +
         std::to_string(p2p_true.size() + p2p_false.size()) + " pairs";
  if (!p2p_false.empty()) out += ", not for";
  for (const auto& pair : p2p_false) out += " " + pair;
  return out;
}

std::vector<P2pCacheFile> gpu_p2p_cache_files(const std::string& root,
                                              const std::string& cache_root) {
  std::vector<P2pCacheFile> out;
  if (cache_root.empty() || cache_root.front() != '/') return out;
  for (const auto& name : list_directory(root + cache_root).value_or(std::vector<std::string>{})) {
    if (name.rfind("gpu_p2p_access_cache_for_", 0) != 0 || out.size() >= kMaxFiles) continue;
    P2pCacheFile p2p;
    p2p.file = read_cache_file(root, cache_root + "/" + name);
    try {
      const auto doc = parse_json_within(
          read_in_root(root, cache_root + "/" + name).value_or(""), kCacheJson, top_level_only);
      for (const auto& [pair, value] : doc.items()) {
        (value.is_boolean() && value.get<bool>() ? p2p.p2p_true : p2p.p2p_false).push_back(pair);
      }
    } catch (const nlohmann::json::exception&) {
      p2p.file.error = "not JSON";
    } catch (const Error& e) {
      p2p.file.error = std::string("refused: ") + e.what();
    }
    out.push_back(std::move(p2p));
  }
  return out;
}

// What the ECMAScript regex (tp|ep)_rank['"]?\s*[,:=]\s*(\d+) finds, scanned by hand: std::regex
// recursed once per character of a run of spaces or digits and overflowed the stack on a long
// key (a cache file's keys are any text). Numbers beyond int are no ranks (std::stoi threw).
void ranks_in_cache_key(const std::string& key, std::set<int>& tp_ranks, std::set<int>& ep_ranks) {
  const auto space = [&](std::size_t i) {
    return i < key.size() && std::isspace(static_cast<unsigned char>(key[i]));
  };
  const auto digit = [&](std::size_t i) {
    return i < key.size() && std::isdigit(static_cast<unsigned char>(key[i]));
  };
  std::size_t pos = 0;
  for (;;) {
    const std::size_t at = std::min(key.find("tp_rank", pos), key.find("ep_rank", pos));
    if (at == std::string::npos) return;
    pos = at + 1;
    std::size_t i = at + 7;
    if (i < key.size() && (key[i] == '\'' || key[i] == '"')) ++i;
    while (space(i)) ++i;
    if (i >= key.size() || (key[i] != ',' && key[i] != ':' && key[i] != '=')) continue;
    ++i;
    while (space(i)) ++i;
    const std::size_t digits = i;
    while (digit(i)) ++i;
    if (i == digits) continue;
    pos = i;
    const auto rank = to_int(std::string_view(key).substr(digits, i - digits));
    if (!rank) continue;  // beyond int: no rank
    (key[at] == 't' ? tp_ranks : ep_ranks).insert(*rank);
  }
}

std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1)
    return "";
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

}  // namespace hangscope::facts
