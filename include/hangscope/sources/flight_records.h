// The post-mortem source: flight-recorder dump files (and the dead job's logs) made into a bundle
// that diagnosis::diagnose reads like snapshots.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hangscope/model/bundle.h"

namespace hangscope::sources {

// One dump file as the command found it: its bytes, or why it could not be read.
struct DumpFile {
  std::string path;
  std::string bytes;
  std::int64_t written_unix_ns = 0;  // its mtime
  std::string error;                 // "" when `bytes` holds the file
};

// The dumps as a bundle: a node per dump (named by its path) holding one rank process (role
// "rank", rank from the dump's `rank` key or its file name's trailing number, world size from
// the widest pg_config, no stacks) with its flight record, every entry kept. A file that cannot
// be read or parsed, or holds no rank, is a node with status "error" naming the reason; of two
// dumps of one rank the newest is kept and the other named in its node's notes. With `read`,
// each file is read by it on the worker thread that parses it (a dump's bytes, its mtime, or
// its error), and every dump's bytes are freed once it is parsed: a directory of many large
// dumps holds about one per core at once, never all of them.
model::Bundle postmortem_bundle(std::vector<DumpFile> files,
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
std::vector<std::string> attach_logs(model::Bundle& bundle, const std::vector<DumpFile>& logs,
                                     std::size_t* kept_bytes = nullptr);

}  // namespace hangscope::sources
