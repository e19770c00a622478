// Folded stacks for flame-graph tools (flamegraph.pl, speedscope, inferno).
#include <algorithm>
#include <map>
#include <sstream>

#include "hangscope/analysis/call_tree.h"
#include "hangscope/common/text.h"
#include "hangscope/report/report.h"

namespace hangscope::report {
namespace {

// A frame of a folded line: printable (no control character, so no newline either), and no ';'
// (the frame separator).
std::string clean(const std::string& label) {
  std::string out = printable(label);
  std::replace(out.begin(), out.end(), ';', ',');
  return out;
}

}  // namespace

std::string stacks_folded(const analysis::Analysis& analysis) {
  std::ostringstream out;
  for (const auto& job : analysis.jobs) {
    for (const auto& rank : job.ranks) {
      std::map<std::string, int> counts;
      std::vector<std::string> order;
      for (const auto* sample : rank.history) {
        if (!sample->dump) continue;
        for (const auto& thread : sample->dump->threads) {
          if (thread.tid != rank.wait.tid) continue;
          const auto& frames = thread.frames.empty() ? thread.native_frames : thread.frames;
          std::string line = clean(job.key.empty() ? "job" : "job " + job.key) + ";rank " +
                             (rank.rank ? std::to_string(*rank.rank) : "?");
          for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
            line += ";" + clean(analysis::frame_label(*it));
          }
          if (counts[line]++ == 0) order.push_back(line);
        }
      }
      for (const auto& line : order) out << line << " " << counts[line] << "\n";
    }
  }
  return out.str();
}

}  // namespace hangscope::report
