// The merged call tree drawn as indented text (Markdown, terminal) and as Graphviz DOT. Frame
// labels come from the targets: printable() in both (no control character, no line of their
// own), and in DOT quotes and backslashes escaped too.
#include <algorithm>
#include <array>
#include <set>
#include <sstream>

#include "hangscope/analysis/call_tree.h"
#include "hangscope/analysis/rank_set.h"
#include "hangscope/common/text.h"
#include "hangscope/report/report.h"

namespace hangscope::report {
namespace {

using analysis::CallTreeNode;

bool is_diverged_branch(const CallTreeNode& node, const analysis::RankSet& diverged) {
  if (diverged.empty() || node.ranks.empty()) return false;
  return std::all_of(node.ranks.begin(), node.ranks.end(),
                     [&](int r) { return diverged.contains(r); });
}

// `marked`: an outer branch already carries the "diverged" mark.
void draw_text(const CallTreeNode& node, const std::string& indent, bool last, bool root,
               const analysis::RankSet& diverged, bool marked, std::ostringstream& out) {
  const std::string branch = root ? "" : (last ? "└─ " : "├─ ");
  out << indent << branch << "[" << analysis::compress_ranks(node.ranks) << "] "
      << printable(node.label);
  const bool mark = !marked && is_diverged_branch(node, diverged);
  if (mark) out << "  <== diverged";
  out << "\n";
  const std::string next = root ? "" : indent + (last ? "   " : "│  ");
  for (std::size_t i = 0; i < node.children.size(); ++i) {
    draw_text(node.children[i], next, i + 1 == node.children.size(), false, diverged,
              marked || mark, out);
  }
}

// A DOT string's content: printable, then `"` and `\` escaped (printable's own "\x1b" too, so
// Graphviz shows it as written instead of reading an escape of its own).
std::string dot_escape(const std::string& text) {
  std::string out;
  for (char c : printable(text)) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

constexpr std::array<const char*, 8> kClassColours = {"#4c72b0", "#55a868", "#8172b2", "#ccb974",
                                                      "#64b5cd", "#8c8c8c", "#dd8452", "#937860"};

void draw_dot(const CallTreeNode& node, const std::string& id, const analysis::RankSet& diverged,
              std::ostringstream& out, int& counter) {
  const bool highlight = is_diverged_branch(node, diverged);
  const char* colour = node.classes.size() == 1
                           ? kClassColours[static_cast<std::size_t>(*node.classes.begin() - 1) %
                                           kClassColours.size()]
                           : "#444444";
  out << "  " << id << " [label=\"" << dot_escape(node.label) << "\\nranks "
      << analysis::compress_ranks(node.ranks) << "\", color=\"" << (highlight ? "#d62728" : colour)
      << "\", penwidth=" << (highlight ? 3 : 1)
      << (highlight ? ", style=\"filled\", fillcolor=\"#fde0dd\"" : "") << "];\n";
  for (const auto& child : node.children) {
    const std::string child_id = "n" + std::to_string(++counter);
    draw_dot(child, child_id, diverged, out, counter);
    const bool child_highlight = is_diverged_branch(child, diverged);
    out << "  " << id << " -> " << child_id << " [label=\"" << child.ranks.size() << "\", color=\""
        << (child_highlight ? "#d62728" : "#444444") << "\""
        << (child_highlight ? ", penwidth=3" : "") << "];\n";
  }
}

analysis::RankSet diverged_in(const analysis::Analysis& analysis, const std::string& job) {
  analysis::RankSet out;
  for (const auto& v : analysis.verdicts) {
    if (v.job == job) out.insert(v.diverged_ranks);
  }
  return out;
}

}  // namespace

std::string tree_text(const analysis::Job& job, const analysis::RankSet& diverged) {
  std::ostringstream out;
  draw_text(analysis::build_call_tree(job), "", true, true, diverged, false, out);
  return out.str();
}

std::string tree_dot(const analysis::Analysis& analysis) {
  std::ostringstream out;
  out << "digraph hangscope {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", "
         "fontsize=10];\n  edge [fontsize=9];\n";
  int counter = 0;
  for (const auto& job : analysis.jobs) {
    const std::string id = "n" + std::to_string(++counter);
    draw_dot(analysis::build_call_tree(job), id, diverged_in(analysis, job.key), out, counter);
  }
  out << "}\n";
  return out.str();
}

}  // namespace hangscope::report
