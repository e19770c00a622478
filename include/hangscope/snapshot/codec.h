// Node snapshots on the wire and on disk: interning frames into a string table, schema
// checks, and snapshot files (.pb binary, anything else protobuf's JSON mapping).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hangscope/common/files.h"
#include "hangscope/common/progress_meter.h"
#include "hangscope/model/node_snapshot.h"

namespace hangscope::v1 {
class NodeSnapshot;
}

namespace hangscope::snapshot {

inline constexpr unsigned kSchemaMajor = 2;  // 2: shared stacks, facts and log lines
inline constexpr unsigned kSchemaMinor = 7;  // 1: the flight record as a message; 2: tasks;
                                             // 3: sockets; 4: typed identity source (and the
                                             // other enums beside their text); 5: the
                                             // flight entry's state typed (FlightState); 6:
                                             // groups outside the registry and their
                                             // stores, and the socket state typed
                                             // (SocketState); 7: a group's collective
                                             // timeout

void encode(const model::NodeSnapshot& node, v1::NodeSnapshot& out);

// What the snapshots decoded through one interner share: each distinct frame, stack, fact map,
// socket list and log excerpt is held once, however many processes, samples and files repeat
// it (a frame 3,000 times in a deep recursion, a stack on every rank of a job, a node's facts
// on each of its processes). Thread-safe (files are decoded in parallel). What the decoded
// snapshots share stays theirs after the interner is gone; it only holds the indexes of a read.
class Interner {
 public:
  Interner();
  ~Interner();
  Interner(const Interner&) = delete;
  Interner& operator=(const Interner&) = delete;

  struct State;  // codec.cpp's
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

// Throws hangscope::Error when the snapshot comes from an unknown newer major schema or holds
// string indices outside its table. `interner`: shared with other decodes (one of its own
// otherwise).
model::NodeSnapshot decode(const v1::NodeSnapshot& in, Interner* interner = nullptr);

// The snapshot as an agent would send it (encode, then decode): every string from the
// targets made valid UTF-8, like every snapshot that arrives from a file or a peer. The local
// capture of diagnose goes through it, so all sources reach the analysis alike.
model::NodeSnapshot as_transmitted(const model::NodeSnapshot& node);

// Writes every snapshot to path, replacing what is there (ReplacingFile: a symbolic link at the
// path is replaced, never written through); throws hangscope::Error naming the path and the
// reason.
void write_file(const std::string& path, const std::vector<model::NodeSnapshot>& nodes);
// The same, for snapshots held elsewhere (no copies).
void write_file(const std::string& path, const std::vector<const model::NodeSnapshot*>& nodes);

// Reads a snapshot file of at most max_bytes (a regular file: read_input_file; `links` kRefuse
// for a file of a bundle); throws hangscope::Error naming the path and the reason. Costs the
// file's bytes (a JSON file: its text, then its binary form alone) and the decoded snapshots,
// each process and each distinct stack parsed from the wire and decoded one at a time, never
// the whole message (docs/performance.md, "Reading snapshots"). A file whose decoding is
// estimated (from its bytes, before parsing) at more than 8 (JSON) or 64 (binary) times its
// size, or 8 times max_bytes, is refused, as is one that runs out of memory (std::bad_alloc):
// the error names the file, and the caller goes on with the others. With `task`, its steps are
// shown as they go (reading, checking, parsing: bytes of the file, decoding: snapshots).
// `interner`: shared by the files of one read (one of its own otherwise).
std::vector<model::NodeSnapshot> read_file(const std::string& path,
                                           std::size_t max_bytes = kDefaultMaxInputBytes,
                                           Links links = Links::kFollow,
                                           ProgressMeter::Task* task = nullptr,
                                           Interner* interner = nullptr);

// What read_file does with the file's bytes: binary protobuf when `binary` (a .pb file), else
// protobuf's JSON mapping; `path` names the file in errors. Throws hangscope::Error.
std::vector<model::NodeSnapshot> parse_file(const std::string& bytes, bool binary,
                                            const std::string& path, Interner* interner = nullptr);

}  // namespace hangscope::snapshot
