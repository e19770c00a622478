#include "hangscope/cli/options.h"

#include <cstdlib>
#include <fstream>

#include "hangscope/common/error.h"
#include "hangscope/common/text.h"

namespace hangscope::cli {

std::optional<std::chrono::milliseconds> parse_duration(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  const std::string unit = text.substr(used);
  double ms = 0;
  if (unit.empty() || unit == "s")
    ms = value * 1000;
  else if (unit == "ms")
    ms = value;
  else if (unit == "m")
    ms = value * 60000;
  else
    return std::nullopt;
  if (ms < 0 || ms > 24.0 * 3600 * 1000) return std::nullopt;
  return std::chrono::milliseconds(static_cast<long long>(ms));
}

std::string load_token(const std::string& token_file) {
  if (token_file.empty()) {
    const char* env = std::getenv("HANGSCOPE_TOKEN");
    return env ? trim(env) : "";
  }
  std::ifstream in(token_file);
  if (!in) throw_errno("cannot read token file " + token_file, errno);
  std::string line;
  std::getline(in, line);
  line = trim(line);
  if (line.empty()) throw Error("token file " + token_file + " is empty");
  return line;
}

std::vector<std::string> agent_addresses(const std::string& agents, const std::string& hostfile) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < agents.size()) {
    auto end = agents.find(',', pos);
    if (end == std::string::npos) end = agents.size();
    if (const auto a = trim(agents.substr(pos, end - pos)); !a.empty()) out.push_back(a);
    pos = end + 1;
  }
  if (!hostfile.empty()) {
    std::ifstream in(hostfile);
    if (!in) throw_errno("cannot read hostfile " + hostfile, errno);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      line = trim(line.substr(0, line.find('#')));
      if (line.empty()) continue;
      if (line.find_first_of(" \t") != std::string::npos) {
        throw Error("hostfile " + hostfile + " line " + std::to_string(number) +
                    ": expected one HOST[:PORT], got '" + line + "'");
      }
      out.push_back(line);
    }
  }
  return out;
}

}  // namespace hangscope::cli
