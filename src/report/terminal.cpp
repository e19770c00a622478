// The terminal summary: the conclusion, the verdicts and the rank table; coloured on a TTY.
// Everything built from a snapshot (function and file names, node names, job keys) goes through
// printable(): the only escape sequences written are the colours' own.
#include <algorithm>
#include <map>
#include <sstream>

#include "hangscope/analysis/rank_set.h"
#include "hangscope/common/text.h"
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
  out << paint(printable(analysis.conclusion), analysis.verdicts.empty() ? "1;32" : "1;31") << "\n";
  std::map<std::string, analysis::RankSet> diverged;  // by job
  for (const auto& v : analysis.verdicts) {
    out << "  " << paint(printable(v.id), "1") << " (" << to_string(v.kind) << ", confidence "
        << std::fixed;
    out.precision(2);
    out << v.confidence << "): " << printable(v.summary) << "\n";
    diverged[v.job].insert(v.diverged_ranks);
  }
  for (const auto& d : analysis.diagnostics) out << "  note: " << printable(d) << "\n";
  for (const auto& job : analysis.jobs) {
    out << "\njob " << (job.key.empty() ? "(unknown)" : printable(job.key))
        << (job.world_size ? ", world size " + std::to_string(*job.world_size) : "") << "\n";
    out << pad("RANK", 6) << pad("NODE", 12) << pad("PID", 9) << pad("STATE", 16) << pad("PROG", 6)
        << "WAIT POINT\n";
    const auto& named = diverged[job.key];
    // The missing ranks one line per range, in rank order among the entries.
    const auto absent = [&](const analysis::RankSet::Interval& i) {
      const auto ranks = analysis::RankSet::range(i.first, i.last);
      const std::string text = ranks.text();  // "8-131071" is wider than the column
      const std::string line = (text.size() < 6 ? pad(text, 6) : text + " ") + pad("-", 12) +
                               pad("-", 9) + pad(std::string(to_string(job.missing_state)), 16) +
                               pad("?", 6) + "-";
      out << (named.intersects(ranks) ? paint(line, "1;31") : line) << "\n";
    };
    const auto& gaps = job.missing.intervals();
    auto gap = gaps.begin();
    for (const auto& r : job.ranks) {
      for (; gap != gaps.end() && (!r.rank || gap->first < *r.rank); ++gap) absent(*gap);
      const std::string rank = r.rank ? std::to_string(*r.rank) : "?";
      // A rank known from a flight-recorder dump alone has no pid and no stacks to show.
      const auto* p = r.latest();
      const bool stacks = p != nullptr && p->dump && !p->dump->threads.empty();
      std::string line = pad(rank, 6) + pad(p == nullptr ? "-" : printable(r.node) + " ", 12) +
                         pad(p == nullptr || r.pid == 0 ? "-" : std::to_string(r.pid), 9) +
                         pad(state_label(r), 16) + pad(progress_word(r), 6) +
                         (stacks ? printable(r.wait.describe()) : "-");
      const bool is_diverged = r.rank && named.contains(*r.rank);
      out << (is_diverged ? paint(line, "1;31") : line) << "\n";
    }
    for (; gap != gaps.end(); ++gap) absent(*gap);
  }
  return out.str();
}

}  // namespace hangscope::report
