// The bundle directory diagnose writes and `hangscope report` reads back: snapshots/ (every
// sample of every node), nodes.json (how each node answered), report.md, report.json,
// tree.dot (+ tree.svg when Graphviz's dot is installed) and stacks.folded.
#pragma once

#include <string>
#include <vector>

#include "hangscope/analysis/analysis.h"
#include "hangscope/analysis/bundle.h"
#include "hangscope/common/files.h"

namespace hangscope::report {

// Writes the snapshots and nodes.json; throws hangscope::Error naming the file and reason.
// Creates DIR and DIR/snapshots (existing ones are fine).
void make_bundle_dirs(const std::string& dir);

void write_bundle_data(const std::string& dir, const analysis::Bundle& bundle);

// Writes the renderings of an analysis; returns notes (e.g. tree.svg skipped: no `dot`).
std::vector<std::string> write_reports(const std::string& dir, const analysis::Bundle& bundle,
                                       const analysis::Analysis& analysis);

// Reads a bundle written by write_bundle_data (files of at most max_bytes each). A bad
// snapshot file becomes a node with status "error" naming the file and the reason; a missing
// directory, or one that is no bundle, throws hangscope::Error.
analysis::Bundle read_bundle(const std::string& dir, std::size_t max_bytes = kDefaultMaxInputBytes);

}  // namespace hangscope::report
