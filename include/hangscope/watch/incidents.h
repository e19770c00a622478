// Where watch keeps an incident (docs/watch.md, "Incidents"): a complete diagnose bundle plus
// watch.json in DIR/<YYYYMMDDTHHMMSSZ>-<job>/, written under a hidden temporary name and renamed
// into place when complete; the oldest beyond --keep removed (only directories watch wrote); the
// --on-hang command run with the incident in its environment.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "hangscope/analysis/analysis.h"
#include "hangscope/model/bundle.h"
#include "hangscope/watch/findings.h"
#include "hangscope/watch/job_progress.h"

namespace hangscope::watch {

// The file of an incident directory that holds what watch saw: the finding and every poll.
inline constexpr std::string_view kWatchFile = "watch.json";

// What an incident is about, for its directory, watch.json, the stdout line and --on-hang; its
// job is the finding's.
struct Incident {
  std::string label;
  std::int64_t detected_unix_ns = 0;
  std::int64_t stalled_since_unix_ns = 0;  // hang: the first poll of the stall
  double after_seconds = 0;                // the stall that made it suspect
  double poll_seconds = 0;
  std::string verdict;  // the top verdict's id ("" when the capture reached none)
  std::string summary;  // its summary
  Finding finding;      // its kind and job, and what watch concluded beyond the samples
};

// "<job key with every character outside [A-Za-z0-9._-] replaced by _>" (at most 100).
std::string sanitize_job(const std::string& job);

// "20261205T101500Z" for a unix time.
std::string utc_stamp(std::int64_t unix_ns);
// "2026-12-05T10:15:00.123Z".
std::string utc_iso(std::int64_t unix_ns);

// Writes the incident into `dir` (created when missing): the bundle's snapshots and nodes.json,
// the reports of `analysis`, and watch.json (the incident and `history`, the job's polls),
// under ".<name>.partial", renamed to <stamp>-<job> (a "-2", "-3" … suffix when taken). Returns
// the final path. Throws hangscope::Error naming the file and reason; nothing partial is left
// under the final name.
std::string write_incident(const std::string& dir, const Incident& incident,
                           const model::Bundle& bundle, const analysis::Analysis& analysis,
                           const std::deque<JobPoll>& history);

// Removes what an interrupted watch left in `dir` (".*.partial" directories it wrote) and the
// oldest incident directories beyond `keep`; returns what was removed or left, for the log.
// Only directories named like an incident and holding watch.json are touched, and in them only
// the files a bundle or watch writes: a directory holding anything else is left, and named.
std::vector<std::string> tidy_incidents(const std::string& dir, std::size_t keep);

// The --on-hang command: `sh -c command` with HANGSCOPE_BUNDLE, HANGSCOPE_JOB,
// HANGSCOPE_VERDICT, HANGSCOPE_SUMMARY (printable: control characters and invalid UTF-8
// escaped), stdin from /dev/null, killed (its process group) after `limit`. Returns its output
// (stdout and stderr, at most 64 KiB) and how it ended, for the log.
struct HookResult {
  bool ok = false;
  std::string ended;  // "exit status 0", "killed after 60 s", "could not start: …"
  std::string output;
};
HookResult run_on_hang(const std::string& command, const std::string& bundle,
                       const Incident& incident, std::chrono::milliseconds limit);

}  // namespace hangscope::watch
