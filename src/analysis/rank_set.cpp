#include "hangscope/analysis/rank_set.h"

namespace hangscope::analysis {

std::string compress_ranks(const std::set<int>& ranks) {
  std::string out;
  auto it = ranks.begin();
  while (it != ranks.end()) {
    const int first = *it;
    int last = first;
    while (std::next(it) != ranks.end() && *std::next(it) == last + 1) {
      ++it;
      ++last;
    }
    if (!out.empty()) out += ",";
    out += std::to_string(first);
    if (last > first) out += (last == first + 1 ? "," : "-") + std::to_string(last);
    ++it;
  }
  return out;
}

std::string compress_ranks(const std::vector<int>& ranks) {
  return compress_ranks(std::set<int>(ranks.begin(), ranks.end()));
}

}  // namespace hangscope::analysis
