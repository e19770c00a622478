// Fuzz target: the CLI's file readers through the real command entry point (cli::run, what
// main runs): the first byte picks the command, the rest is the file it reads — a JSON or
// binary snapshot (`diagnose FILE`), a bundle's snapshot (`report BUNDLE`), a rule file
// (`rules check FILE`, `rules list --rules DIR`). Any exit code is an answer; an exception out
// of cli::run, a sanitizer report, a leak or a timeout is a finding.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "hangscope/cli/commands.h"

namespace {

// This process's scratch directory (inputs and bundles): made once, removed at exit.
class Scratch {
 public:
  Scratch() : dir_("/tmp/hangscope-fuzz-cli-" + std::to_string(::getpid())) {
    for (const char* sub : {"", "/rules", "/bundle", "/bundle/snapshots"}) {
      ::mkdir((dir_ + sub).c_str(), 0700);
    }
  }
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

const std::string& scratch() {
  static const Scratch scratch;
  return scratch.dir();
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

int run(std::vector<std::string> args) {
  args.insert(args.begin(), "hangscope");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return hangscope::cli::run(static_cast<int>(args.size()), argv.data());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The commands print reports: keep them off the fuzzer's terminal.
  if (std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string& d = scratch();
  const std::string bytes = hangscope::fuzz::input(data + 1, size - 1);
  const std::string out = d + "/out";
  switch (data[0] % 5) {
    case 0:
      write(d + "/in.json", bytes);
      run({"diagnose", d + "/in.json", "-o", out, "--force", "--quiet", "--max-input-mib", "4"});
      break;
    case 1:
      write(d + "/in.pb", bytes);
      run({"diagnose", d + "/in.pb", "-o", out, "--force", "--quiet", "--max-input-mib", "4"});
      break;
    case 2:
      write(d + "/bundle/snapshots/node.json", bytes);
      run({"report", d + "/bundle", "--json", "--max-input-mib", "4"});
      break;
    case 3:
      write(d + "/rule.json", bytes);
      run({"rules", "check", "--json", d + "/rule.json"});
      break;
    default:
      write(d + "/rules/rule.json", bytes);
      run({"rules", "list", "--json", "--rules", d + "/rules"});
      break;
  }
  return 0;
}
