// Post-mortem diagnosis from flight-recorder dumps alone (the job is gone): the dump files made
// into a bundle that diagnosis::diagnose reads like snapshots, and the correlation of those dumps
// by what each process group as a whole shows, never against one reference rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hangscope/analysis/analysis.h"
#include "hangscope/analysis/bundle.h"

namespace hangscope::analysis {

// One dump file as the command found it: its bytes, or why it could not be read.
struct DumpFile {
  std::string path;
  std::string bytes;
  std::int64_t written_unix_ns = 0;  // its mtime
  std::string error;                 // "" when `bytes` holds the file
};

// The identity source of a rank known from its dump alone (RankIdentity::source).
inline constexpr const char* kPostMortemSource = "flight-recorder";

// A dump written this long before the median write time of the set is stale (a leftover of an
// earlier run): named, not correlated.
inline constexpr std::chrono::minutes kStaleBeforeMedian{10};

// The dumps as a bundle: a node per dump (named by its path) holding one rank process (role
// "rank", rank from the dump's `rank` key or its file name's trailing number, world size from
// the widest pg_config, no stacks) with its flight record, every entry kept. A file that cannot
// be read or parsed, or holds no rank, is a node with status "error" naming the reason; of two
// dumps of one rank the newest is kept and the other named in its node's notes. With `read`,
// each file is read by it on the worker thread that parses it (a dump's bytes, its mtime, or
// its error), and every dump's bytes are freed once it is parsed: a directory of many large
// dumps holds about one per core at once, never all of them.
Bundle postmortem_bundle(std::vector<DumpFile> files,
                         const std::function<void(DumpFile&)>& read = {});

// The dead job's log files (--log with --flight-records; DumpFile holds a log's last bytes) given
// to the ranks of `bundle` they belong to, for the signature rules: a line that starts with
// torchrun's "[rankN]:" prefix to rank N; a line with vLLM's process prefix ("(Worker_TP1
// pid=123) …") to the rank that prefix's own "world_size=… rank=…" or "rank R in world size W is
// assigned as …" line names, else to N for "Worker_TPN" (no PP or DP part); the other lines of a
// file whose name ends with a rank number to that rank; the rest to no rank. Returns a note per
// log that gave no rank a line. Adds the bytes of the lines kept to `*kept_bytes` when given
// (the caller's budget across logs). Reading one log costs up to about 20 times its size
// (line views, the per-prefix and per-rank copies) until it returns.
std::vector<std::string> attach_logs(Bundle& bundle, const std::vector<DumpFile>& logs,
                                     std::size_t* kept_bytes = nullptr);

// Whether every rank of `job` is known from a flight-recorder dump only (identity source
// kPostMortemSource, no stacks): the
// post-mortem correlation applies instead of the live one and the stack-based verdicts.
bool flight_records_only(const Job& job);

// Per process group, the group's consensus (median of the collectives issued; majority of the
// operation, sizes, dtypes and state at each sequence number) against each rank: ranks behind
// (collective-behind), ahead (collective-ahead), disagreeing (collective-mismatch), members
// without a usable dump (flight-record-missing), and every rank in one collective that none
// completed (collective-transport, no rank named). Fills each rank's `collectives` lines and the
// waiting ranks' wait-for edges.
std::vector<Verdict> postmortem_flight_verdicts(Job& job);

// The conclusion when the dumps show no hang, said plainly.
std::string postmortem_no_divergence(const std::vector<Job>& jobs);

}  // namespace hangscope::analysis
