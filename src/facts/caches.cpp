#include "hangscope/facts/caches.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "hangscope/common/files.h"

namespace hangscope::facts {
namespace {

constexpr std::size_t kMaxFiles = 64;
constexpr int kMaxDepth = 5;
constexpr std::size_t kMaxFileBytes = 16u << 20;

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

CacheFile read_cache_file(const std::string& root, const std::string& path) {
  CacheFile file;
  file.path = path;
  struct stat st {};
  if (::stat((root + path).c_str(), &st) == 0) {
    file.size = static_cast<std::uint64_t>(st.st_size);
    file.mtime_unix = st.st_mtim.tv_sec;
  }
  const auto read = read_file(root + path, kMaxFileBytes);
  if (!read.text) {
    file.error = "cannot be read";
    return file;
  }
  file.sha256 = sha256_hex(*read.text);
  try {
    const auto doc = nlohmann::json::parse(*read.text);
    for (const auto& [key, value] : doc.items()) {
      if (!key.empty() && key.front() == '_') continue;  // _metadata, _generation, _records
      ++file.entries;
      ranks_in_cache_key(key, file.tp_ranks, file.ep_ranks);
    }
  } catch (const nlohmann::json::exception&) {
    file.error = "not JSON";
  }
  return file;
}

std::string join(const std::set<int>& values) {
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
  if (!tp_ranks.empty()) out += ", keys for tp_rank " + join(tp_ranks);
  if (!ep_ranks.empty()) out += ", ep_rank " + join(ep_ranks);
  return out;
}

std::string flashinfer_autotune_dir(const std::map<std::string, std::string>& env) {
  const auto get = [&](const char* name) {
    const auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  if (auto dir = get("VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR"); !dir.empty()) return dir;
  if (auto root = get("VLLM_CACHE_ROOT"); !root.empty()) return root + "/flashinfer_autotune_cache";
  if (auto xdg = get("XDG_CACHE_HOME"); !xdg.empty())
    return xdg + "/vllm/flashinfer_autotune_cache";
  if (auto home = get("HOME"); !home.empty())
    return home + "/.cache/vllm/flashinfer_autotune_cache";
  return "";
}

std::vector<CacheFile> flashinfer_autotune_files(const std::string& root, const std::string& dir) {
  std::vector<CacheFile> out;
  if (dir.empty() || dir.front() != '/') return out;
  std::vector<std::string> paths;
  find_files(root, dir, 0, paths);
  for (const auto& p : paths) out.push_back(read_cache_file(root, p));
  return out;
}

void ranks_in_cache_key(const std::string& key, std::set<int>& tp_ranks, std::set<int>& ep_ranks) {
  static const std::regex rank(R"re((tp|ep)_rank['"]?\s*[,:=]\s*(\d+))re");
  for (auto it = std::sregex_iterator(key.begin(), key.end(), rank); it != std::sregex_iterator();
       ++it) {
    ((*it)[1] == "tp" ? tp_ranks : ep_ranks).insert(std::stoi((*it)[2]));
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
