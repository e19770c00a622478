// What watch concludes beyond the samples of an incident, and how it enters the incident's
// analysis: a rank that exited while its peers wait (watch's own verdict: a capture taken after
// the exit no longer holds that rank), or the job whose verdicts lead. Kept in watch.json so
// that `hangscope report` on the incident reaches the verdict watch announced.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hangscope/analysis/analysis.h"
#include "hangscope/watch/job_progress.h"

namespace hangscope::watch {

struct Finding {
  enum class Kind {
    kHang,      // a stall the samples confirmed: the job's verdicts lead
    kRankDead,  // a rank exited while its peers wait: watch's rank-dead verdict leads
  };
  Kind kind = Kind::kHang;
  std::string job;
  RankReading dead;                  // kRankDead: the rank that exited
  std::vector<RankReading> waiting;  // kRankDead: the ranks that waited meanwhile
  std::string where_waiting;         // kRankDead: where they wait, from the confirming capture
};

// "hang" | "rank-dead".
std::string_view to_string(Finding::Kind kind);

// The finding of an event: `found` is the analysis of the confirming capture (where the peers
// of a rank that exited wait: native stacks show a store wait called from user code).
Finding finding_of(const JobEvent& event, const analysis::Analysis& found);

// Whether a verdict is about `job`: its own, or one that spans it.
bool about_job(const analysis::Verdict& v, const std::string& job);

// The first verdict (they are ordered) about `job`; nullptr when none.
const analysis::Verdict* verdict_for(const analysis::Analysis& analysis, const std::string& job);

// Puts the finding into the analysis of the incident's capture: the rank-dead verdict first,
// or, for a hang, the job's own verdicts first (the capture holds every job of the nodes, and
// another job hung meanwhile may have a verdict of higher confidence), the others after them in
// their order. The conclusion is the leading verdict's summary. Returns the leading verdict
// about the job; nullptr when there is none (a hang the samples did not confirm).
const analysis::Verdict* apply_finding(analysis::Analysis& analysis, const Finding& finding);

// "rank 3 (node-a pid 4242)", or "a process (…)" for a process of unknown rank.
std::string rank_reading_text(const RankReading& r);

// A rank reading as watch.json holds it (its observations, a finding's ranks), and back (throws
// hangscope::Error naming `in` and the field).
nlohmann::json rank_reading_json(const RankReading& r);
RankReading rank_reading_from_json(const nlohmann::json& j, const std::string& in);

// The finding as watch.json's "finding" object, and back. from_json throws hangscope::Error
// naming the field that is missing or of the wrong type.
nlohmann::json finding_json(const Finding& finding);
Finding finding_from_json(const nlohmann::json& j);

// The finding of an incident directory (its watch.json); nullopt when `dir` holds no
// watch.json, or one written before findings were kept (it then says nothing beyond its
// samples). Throws hangscope::Error naming the file and the reason when it cannot be read.
std::optional<Finding> read_finding(const std::string& dir);

}  // namespace hangscope::watch
