// Versions of the packages that decide known hangs (vllm, torch, flashinfer, ray, NCCL, …),
// read from the process's own files — package metadata beside the code it runs and the shared
// libraries it mapped — without importing or running anything.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace hangscope::facts {

// The packages hangscope reports, by normalized name (PEP 503: lowercase, '-' for [-_.]).
const std::vector<std::string>& packages_of_interest();

// Versions of the packages of interest found next to `paths` (Python files the process runs,
// files it mapped): each ancestor directory of a path is searched for NAME-VERSION.dist-info
// (Version: from METADATA) and NAME-VERSION.egg-info. `root` prefixes every path (the
// process's /proc/PID/root). Also "nccl" from a mapped libnccl.so.X.Y.Z, "python" is not here.
std::map<std::string, std::string> package_versions(const std::string& root,
                                                    const std::vector<std::string>& paths);

}  // namespace hangscope::facts
