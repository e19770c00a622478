// Fuzz target: what a rank's own process says about who it is, as capture reads it: its
// process title (setproctitle), environment variables, log lines and cache file keys. The
// input's lines: the first is the title, KEY=VALUE lines are the environment, every line is
// also a log line and a FlashInfer autotune cache key. Feeds identity::parse_title,
// identity::identify, identity::job_key, identity::identify_from_log (with and without a rank
// from the environment) and facts::ranks_in_cache_key, which replaced a std::regex search
// (recursive per character): on lines short enough for std::regex it must find the same ranks.
#include <map>
#include <regex>
#include <set>
#include <stdexcept>

#include "fuzz_support.h"
#include "hangscope/common/text.h"
#include "hangscope/facts/caches.h"
#include "hangscope/identity/rank_identity.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hangscope;
  const auto lines = split_lines(fuzz::input(data, size));
  if (lines.empty()) return 0;
  std::map<std::string, std::string> env;
  for (const auto& line : lines) {
    const auto eq = line.find('=');
    if (eq != std::string::npos && eq > 0) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  (void)identity::parse_title(lines.front());
  auto id = identity::identify(env, data[0] & 1, lines.front());
  (void)identity::job_key(env);
  identity::identify_from_log(lines, id);
  model::RankIdentity fresh;
  identity::identify_from_log(lines, fresh);
  static const std::regex rank(R"re((tp|ep)_rank['"]?\s*[,:=]\s*(\d+))re");
  for (const auto& line : lines) {
    std::set<int> tp, ep;
    facts::ranks_in_cache_key(line, tp, ep);
    if (line.size() > 1024) continue;  // (std::regex is slow: keep the target fast)
    std::set<int> tp_regex, ep_regex;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), rank);
         it != std::sregex_iterator(); ++it) {
      try {  // (std::stoi threw on numbers beyond int: such a number is no rank now)
        ((*it)[1] == "tp" ? tp_regex : ep_regex).insert(std::stoi((*it)[2]));
      } catch (const std::out_of_range&) {
      }
    }
    if (tp != tp_regex || ep != ep_regex) __builtin_trap();
  }
  return 0;
}
