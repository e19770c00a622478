// The bundle directory diagnose writes and `hangscope report` reads back: snapshots/ (every
// sample of every node), nodes.json (how each node answered), report.md, report.json,
// tree.dot (+ tree.svg when Graphviz's dot is installed) and stacks.folded.
//
// Bundles are shared on tickets and re-run: every file is written by replacing what is at its
// name (ReplacingFile: a symbolic link there is replaced, never written through), and read
// without following a link (a bundle cannot point `report` at a file outside it).
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "hangscope/analysis/analysis.h"
#include "hangscope/common/files.h"
#include "hangscope/common/progress_meter.h"
#include "hangscope/model/bundle.h"

namespace hangscope::report {

// The files a bundle consists of, by name, beside kSnapshotsDir: all that write_bundle_data and
// write_reports write, and all that `diagnose -o DIR --force` may remove.
inline constexpr std::array<std::string_view, 6> kBundleFiles = {
    "nodes.json", "report.md", "report.json", "tree.dot", "tree.svg", "stacks.folded"};
inline constexpr std::string_view kSnapshotsDir = "snapshots";

// A snapshot file's name in snapshots/: NODE.json or NODE.pb, NODE of [A-Za-z0-9._-].
bool is_snapshot_file_name(std::string_view name);

// `diagnose -o DIR --force`: removes an earlier bundle's files from DIR, by name (kBundleFiles
// as regular files, snapshots/ holding only snapshot files, and the new files of an interrupted
// write of them) and nothing else. When DIR holds anything else (another file, a symbolic link,
// a directory, a file in snapshots/ no bundle writes), nothing is removed and that entry is
// returned ("notes.txt", "snapshots/x"); "" when DIR was emptied. Throws hangscope::Error naming
// the directory or file and the reason when it cannot be listed or removed.
std::string remove_earlier_bundle(const std::string& dir);

// Writes the snapshots and nodes.json; throws hangscope::Error naming the file and reason.
// Creates DIR and DIR/snapshots (existing ones are fine).
void make_bundle_dirs(const std::string& dir);

// With `task`, the files written are counted into it.
void write_bundle_data(const std::string& dir, const model::Bundle& bundle,
                       ProgressMeter::Task* task = nullptr);

// Writes the renderings of an analysis; returns notes (e.g. tree.svg skipped: no `dot`).
std::vector<std::string> write_reports(const std::string& dir, const model::Bundle& bundle,
                                       const analysis::Analysis& analysis);

// Reads a bundle written by write_bundle_data (files of at most max_bytes each; a symbolic link,
// FIFO or device among them is refused). A bad snapshot file becomes a node with status "error"
// naming the file and the reason; a missing directory, or one that is no bundle, throws
// hangscope::Error. With `meter`, each snapshot file read is a phase of it.
model::Bundle read_bundle(const std::string& dir, std::size_t max_bytes = kDefaultMaxInputBytes,
                          ProgressMeter* meter = nullptr);

}  // namespace hangscope::report
