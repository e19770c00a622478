// The terminal summary: the conclusion, the verdicts and the rank table; coloured on a TTY.
#include <algorithm>
#include <set>
#include <sstream>

#include "hangscope/analysis/rank_set.h"
#include "hangscope/report/report.h"

namespace hangscope::report {
namespace {

class Paint {
 public:
  explicit Paint(bool colour) : colour_(colour) {}
  std::string operator()(const std::string& text, const char* code) const {
    return colour_ ? std::string("\033[") + code + "m" + text + "\033[0m" : text;
  }

 private:
  bool colour_;
};

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string progress_word(const analysis::RankEntry& r) {
  if (!r.progress.progressing) return "?";
  return *r.progress.progressing ? "yes" : "no";
}

}  // namespace

std::string terminal_summary(const analysis::Analysis& analysis, bool colour) {
  const Paint paint(colour);
  std::ostringstream out;
  out << paint(analysis.conclusion, analysis.verdicts.empty() ? "1;32" : "1;31") << "\n";
  std::set<std::pair<std::string, int>> diverged, waiting;
  for (const auto& v : analysis.verdicts) {
    out << "  " << paint(v.id, "1") << " (" << to_string(v.kind) << ", confidence " << std::fixed;
    out.precision(2);
    out << v.confidence << "): " << v.summary << "\n";
    for (int r : v.diverged_ranks) diverged.insert({v.job, r});
    for (int r : v.waiting_ranks) waiting.insert({v.job, r});
  }
  for (const auto& job : analysis.jobs) {
    out << "\njob " << (job.key.empty() ? "(unknown)" : job.key)
        << (job.world_size ? ", world size " + std::to_string(*job.world_size) : "") << "\n";
    out << pad("RANK", 6) << pad("NODE", 12) << pad("PID", 9) << pad("STATE", 16) << pad("PROG", 6)
        << "WAIT POINT\n";
    for (const auto& r : job.ranks) {
      const std::string rank = r.rank ? std::to_string(*r.rank) : "?";
      std::string line = pad(rank, 6) + pad(r.history.empty() ? "-" : r.node, 12) +
                         pad(r.history.empty() ? "-" : std::to_string(r.pid), 9) +
                         pad(std::string(to_string(r.state)), 16) + pad(progress_word(r), 6) +
                         (r.history.empty() ? "-" : r.wait.describe());
      const bool is_diverged = r.rank && diverged.count({job.key, *r.rank});
      out << (is_diverged ? paint(line, "1;31") : line) << "\n";
    }
  }
  return out.str();
}

}  // namespace hangscope::report
