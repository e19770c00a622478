#include "python_targets.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>

namespace hangscope::testing {

namespace {

// pyenv CPython 3.x builds whose minor version satisfies `wanted`.
template <typename Wanted>
std::vector<PythonInterpreter> pyenv_interpreters(Wanted wanted) {
  std::vector<PythonInterpreter> found;
  std::set<std::string> roots;
  if (const char* root = std::getenv("PYENV_ROOT")) roots.insert(root);
  if (const char* home = std::getenv("HOME")) roots.insert(std::string(home) + "/.pyenv");
  roots.insert("/root/.pyenv");
  std::set<std::string> seen;
  for (const auto& root : roots) {
    DIR* dir = ::opendir((root + "/versions").c_str());
    if (dir == nullptr) continue;
    while (const dirent* entry = ::readdir(dir)) {
      const std::string version = entry->d_name;
      int major = 0, minor = 0;
      if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2 || major != 3 ||
          !wanted(minor)) {
        continue;
      }
      const std::string path = root + "/versions/" + version + "/bin/python3";
      if (::access(path.c_str(), X_OK) != 0 || !seen.insert(version).second) continue;
      std::string label = "pyenv_" + version;
      std::replace(label.begin(), label.end(), '.', '_');
      found.push_back({label, path});
    }
    ::closedir(dir);
  }
  std::sort(found.begin(), found.end(), [](const PythonInterpreter& a, const PythonInterpreter& b) {
    return a.label < b.label;
  });
  return found;
}

}  // namespace

std::vector<PythonInterpreter> old_python_interpreters() {
  return pyenv_interpreters([](int minor) { return minor < 10; });
}

std::vector<PythonInterpreter> python_interpreters() {
  auto found = pyenv_interpreters([](int minor) { return minor >= 10; });
  if (::access("/usr/bin/python3", X_OK) == 0)
    found.push_back({"debian_python3", "/usr/bin/python3"});
  return found;
}

std::unique_ptr<TargetProcess> start_secret_rank(const std::string& log,
                                                 const std::map<std::string, std::string>& env) {
  const std::string script = HANGSCOPE_SOURCE_DIR "/tests/fixtures/python/secret_rank.py";
  auto environment = env;
  environment.emplace("RANK", "0");
  environment.emplace("WORLD_SIZE", "1");
  auto rank = std::make_unique<TargetProcess>(
      std::vector<std::string>{"/bin/bash", "-c",
                               "exec >" + log + " 2>&1; exec /usr/bin/python3 " + script +
                                   " --api-key sk-planted-in-cmdline"},
      environment);
  const bool started = eventually([&] {
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.find("non-default args") != std::string::npos;
  });
  if (!started) throw std::runtime_error("secret_rank.py did not start (log: " + log + ")");
  return rank;
}

}  // namespace hangscope::testing
