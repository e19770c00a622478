#include "hangscope/facts/versions.h"

#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "hangscope/common/files.h"
#include "hangscope/model/package_version.h"

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
    const std::string name = model::normalize_package_name(package);
    if (std::find(wanted.begin(), wanted.end(), name) == wanted.end() || out.count(name)) continue;
    const std::string base = root + dir + "/" + entry;
    std::string version =
        metadata_version(base + (kind == "dist-info" ? "/METADATA" : "/PKG-INFO"));
    if (version.empty() && kind == "egg-info") version = metadata_version(base);  // a file
    out[name] = version.empty() ? file_version : version;
  }
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

}  // namespace hangscope::facts
