#include "hangscope/facts/versions.h"

#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "hangscope/common/files.h"

namespace hangscope::facts {
namespace {

// "Version: 1.2.3" from a METADATA or PKG-INFO file ("" when absent). A FIFO or device planted
// there is refused without being opened (an agent reading it would block).
std::string metadata_version(const std::string& file) {
  std::istringstream in(read_file(file, 64 * 1024).text.value_or(""));
  std::string line;
  for (int i = 0; i < 64 && std::getline(in, line); ++i) {
    if (line.rfind("Version:", 0) == 0) {
      auto v = line.substr(8);
      v.erase(0, v.find_first_not_of(" \t"));
      while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
      return v;
    }
  }
  return "";
}

void scan_site_dir(const std::string& root, const std::string& dir,
                   std::map<std::string, std::string>& out) {
  static const RE2 info(R"((.+?)-([0-9][^-]*?)(-py[0-9.]+)?\.(dist-info|egg-info))");
  const auto& wanted = packages_of_interest();
  for (const auto& entry : list_directory(root + dir).value_or(std::vector<std::string>{})) {
    if (entry.size() < 5 || entry.compare(entry.size() - 5, 5, "-info") != 0) continue;
    std::string package, file_version, python, kind;
    if (!RE2::FullMatch(entry, info, &package, &file_version, &python, &kind)) continue;
    const std::string name = normalize_package_name(package);
    if (std::find(wanted.begin(), wanted.end(), name) == wanted.end() || out.count(name)) continue;
    const std::string base = root + dir + "/" + entry;
    std::string version =
        metadata_version(base + (kind == "dist-info" ? "/METADATA" : "/PKG-INFO"));
    if (version.empty() && kind == "egg-info") version = metadata_version(base);  // a file
    out[name] = version.empty() ? file_version : version;
  }
}

// Appends a decimal digit to n, saturating at 10^18 - 1: a version's numbers come from the
// target's files and may be any length (longer ones compare equal to each other).
void append_digit(long& n, char digit) {
  constexpr long kMax = 999'999'999'999'999'999;
  n = n > (kMax - 9) / 10 ? kMax : n * 10 + (digit - '0');
}

// 1.2.3rc1.dev4 → ({1,2,3}, stage, stage number, dev): final releases sort after pre-releases.
std::tuple<std::vector<long>, int, long, long> version_key(const std::string& v) {
  std::vector<long> release;
  std::size_t i = 0;
  while (i < v.size() && !std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
    long n = 0;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) append_digit(n, v[i++]);
    release.push_back(n);
    if (i < v.size() && v[i] == '.' && i + 1 < v.size() &&
        std::isdigit(static_cast<unsigned char>(v[i + 1]))) {
      ++i;
    } else {
      break;
    }
  }
  while (!release.empty() && release.back() == 0) release.pop_back();
  const std::string rest = v.substr(i);
  const auto number_after = [&](const std::string& tag) -> long {
    const auto at = rest.find(tag);
    if (at == std::string::npos) return -1;
    long n = 0;
    for (std::size_t j = at + tag.size();
         j < rest.size() && std::isdigit(static_cast<unsigned char>(rest[j])); ++j) {
      append_digit(n, rest[j]);
    }
    return n;
  };
  int stage = 3;  // final
  long stage_number = 0;
  for (const auto& [tag, s] :
       std::vector<std::pair<std::string, int>>{{"rc", 2}, {"b", 1}, {"a", 0}}) {
    if (const long n = number_after(tag); n >= 0 && rest.find(tag) < rest.find('+')) {
      stage = s;
      stage_number = n;
      break;
    }
  }
  const long dev = number_after(".dev");
  // A dev release sorts before everything else of the same release and stage.
  return {release, stage, stage_number, dev >= 0 ? dev : std::numeric_limits<long>::max()};
}

}  // namespace

const std::vector<std::string>& packages_of_interest() {
  static const std::vector<std::string> names = {"vllm",
                                                 "torch",
                                                 "flashinfer-python",
                                                 "flashinfer",
                                                 "ray",
                                                 "nvidia-nccl-cu12",
                                                 "nvidia-nccl-cu11",
                                                 "triton",
                                                 "transformers",
                                                 "sglang",
                                                 "deepspeed"};
  return names;
}

std::string normalize_package_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == '_' || l == '.' || l == '-') {
      if (out.empty() || out.back() != '-') out += '-';
    } else {
      out += l;
    }
  }
  return out;
}

std::map<std::string, std::string> package_versions(const std::string& root,
                                                    const std::vector<std::string>& paths) {
  std::set<std::string> dirs;
  std::map<std::string, std::string> out;
  static const RE2 nccl(R"(/libnccl\.so\.([0-9]+\.[0-9]+\.[0-9]+)$)");
  for (const auto& path : paths) {
    std::string nccl_version;
    if (RE2::PartialMatch(path, nccl, &nccl_version)) out.emplace("nccl", nccl_version);
    if (path.empty() || path.front() != '/') continue;
    for (auto slash = path.rfind('/'); slash != std::string::npos && slash > 0;
         slash = path.rfind('/', slash - 1)) {
      if (!dirs.insert(path.substr(0, slash)).second) break;  // its ancestors are in already
    }
  }
  for (const auto& dir : dirs) scan_site_dir(root, dir, out);
  return out;
}

int compare_versions(const std::string& a, const std::string& b) {
  const auto ka = version_key(a), kb = version_key(b);
  return ka < kb ? -1 : (kb < ka ? 1 : 0);
}

}  // namespace hangscope::facts
