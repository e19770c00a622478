// The bundle directory diagnose writes and `hangscope report` reads back: snapshots/ (every
// sample of every node), nodes.json (how each node answered), report.md, report.json,
// tree.dot (+ tree.svg when Graphviz's dot is installed) and stacks.folded; the layout's names
// are snapshot/bundle_layout.h's, reading a bundle back is sources/sources.h's.
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
#include "hangscope/snapshot/bundle_layout.h"

namespace hangscope::report {

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

}  // namespace hangscope::report
