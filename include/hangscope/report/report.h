// The diagnose report of a bundle: report.json (design contract, docs/report-json.md),
// report.md (ticket-ready Markdown), tree.dot, stacks.folded and the terminal summary.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>
#include <string_view>

#include "hangscope/analysis/analysis.h"
#include "hangscope/model/bundle.h"

namespace hangscope::report {

using model::Bundle;
using model::NodeStatus;

nlohmann::json report_json(const model::Bundle& bundle, const analysis::Analysis& analysis);
// The same document written to `out` rank entry by rank entry (large jobs).
void write_report_json(std::ostream& out, const model::Bundle& bundle,
                       const analysis::Analysis& analysis);

// GitHub-flavoured Markdown: the verdict in the first lines, then the rank table, wait-for
// chain, merged tree, representative stacks, nodes and how it was captured; under 65,000
// characters (long parts in <details>, the rest in the bundle).
std::string report_markdown(const model::Bundle& bundle, const analysis::Analysis& analysis);

// Graphviz DOT of every job's merged call tree, branches labelled with rank sets and coloured
// by class, the diverged ranks' branches highlighted.
std::string tree_dot(const analysis::Analysis& analysis);

// The merged call tree as indented text with rank sets (the Markdown report and the terminal).
std::string tree_text(const analysis::Job& job, const analysis::RankSet& diverged = {});

// Folded stacks (flame-graph input): "job;rank N;outer;…;inner COUNT", one line per distinct
// stack of a rank, counted over samples.
std::string stacks_folded(const analysis::Analysis& analysis);

// The verdict and the rank table for stdout; ANSI colours when `colour`.
std::string terminal_summary(const analysis::Analysis& analysis, bool colour);

// Text from a target, a file or a peer (or prose built from it) as Markdown that shows it as it
// is and does nothing else: printable() (no control character, so no line of its own), then every
// character Markdown could read as structure escaped (backslashes, backticks, emphasis, links and
// images, HTML, table pipes; at its start whatever would open a heading, list, quote or fence;
// `>` elsewhere and "<-" open nothing and stay).
std::string markdown_text(std::string_view text);
// The same text as an inline code span: printable(), delimited by more backticks than it holds.
// Not for table cells (a pipe inside a code span still splits a GitHub table).
std::string markdown_code(std::string_view text);

// "2026-11-29T17:31:56Z" from nanoseconds since the epoch.
std::string utc_time(std::int64_t unix_ns);

}  // namespace hangscope::report
