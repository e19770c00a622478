// report.md: a GitHub issue body. The verdict in its first three lines, then the evidence,
// rank table, wait-for chain, merged tree, representative stacks, other processes, nodes and
// how it was captured. Long parts are collapsed; the whole stays under GitHub's limit.
//
// Every string that comes from a snapshot, and every sentence the analysis built from one (a
// summary naming a function, a wait point, a node), is foreign text: it is written through
// markdown_text (prose, table cells), markdown_code (inline code), html_text (inside <summary>)
// or inside a fence longer than any run of backticks in it, never as it is. Only hangscope's own
// words and numbers are written raw.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "hangscope/analysis/call_tree.h"
#include "hangscope/analysis/rank_set.h"
#include "hangscope/common/text.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/report/report.h"
#include "hangscope/version.h"

namespace hangscope::report {
namespace {

using analysis::RankEntry;

constexpr std::size_t kBodyLimit = 60000;  // GitHub refuses bodies over 65,536 characters
constexpr std::size_t kRankRowsShown = 256;

// Foreign text in a table cell or a line of prose (markdown_text).
std::string cell(std::string_view text) {
  return markdown_text(text);
}

// Foreign text inside an HTML block (<summary>), where Markdown is not read: printable, and
// HTML's own characters as entities.
std::string html_text(std::string_view text) {
  std::string out;
  for (const char c : printable(text)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(const std::optional<int>& v) {
  return v ? std::to_string(*v) : "-";
}

// The longest run of backticks in `text`.
std::size_t longest_backtick_run(std::string_view text) {
  std::size_t longest = 0;
  std::size_t run = 0;
  for (const char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return longest;
}

// A fenced block of lines whose foreign parts went through printable(): the fence is longer
// than any run of backticks in them, so no line can close it.
std::string fence(const std::string& text) {
  const std::string ticks(std::max<std::size_t>(3, longest_backtick_run(text) + 1), '`');
  return ticks + "text\n" + text + ticks + "\n";
}

// `summary` is HTML (html_text for its foreign parts).
std::string details(const std::string& summary, const std::string& body) {
  return "<details><summary>" + summary + "</summary>\n\n" + body + "\n</details>\n";
}

std::string verdict_section(const analysis::Analysis& a) {
  std::ostringstream md;
  if (a.verdicts.empty()) {
    md << "# hangscope: no divergence found\n\n" << cell(a.conclusion) << "\n\n";
    return md.str();
  }
  const auto& top = a.verdicts.front();
  md << "# hangscope: " << cell(top.summary) << "\n\n";
  md << "**Verdict " << markdown_code(top.id) << "** (" << to_string(top.kind) << ", confidence "
     << std::fixed;
  md.precision(2);
  md << top.confidence << "): " << cell(top.title) << ". Diverged: "
     << (top.diverged_ranks.empty() ? "none named"
                                    : "rank " + analysis::compress_ranks(top.diverged_ranks))
     << "; waiting: "
     << (top.waiting_ranks.empty() ? "none" : analysis::compress_ranks(top.waiting_ranks))
     << (top.job.empty() ? "" : " (job " + markdown_code(top.job) + ")") << ".\n\n";
  for (const auto& v : a.verdicts) {
    if (&v != &top) {
      md << "**Also " << markdown_code(v.id) << "** (" << to_string(v.kind) << ", confidence "
         << v.confidence
         << (v.explained_by.empty() ? "" : ", explained by " + markdown_code(v.explained_by))
         << "): " << cell(v.summary) << "\n\n";
    }
  }
  md << "### Evidence\n\n";
  for (const auto& v : a.verdicts) {
    for (const auto& e : v.evidence)
      md << "- " << (a.verdicts.size() > 1 ? markdown_code(v.id) + " " : "") << cell(e) << "\n";
  }
  bool any = false;
  for (const auto& v : a.verdicts) {
    for (const auto& r : v.remedies) {
      if (!any) md << "\n### What to do\n\n";
      any = true;
      md << "- " << cell(r) << "\n";
    }
  }
  for (const auto& v : a.verdicts) {
    if (!v.references.empty()) {
      md << "\nReferences (" << markdown_code(v.id) << "): ";
      for (std::size_t i = 0; i < v.references.size(); ++i) {
        md << (i ? ", " : "") << cell(v.references[i]);
      }
      md << "\n";
    }
  }
  md << "\n";
  return md.str();
}

// What the input says that cannot all be true, and what the analysis did about it.
std::string diagnostics_section(const analysis::Analysis& a) {
  if (a.diagnostics.empty()) return "";
  std::ostringstream md;
  md << "## Diagnostics: input that does not add up\n\n";
  for (const auto& d : a.diagnostics) md << "- " << cell(d) << "\n";
  md << "\n";
  return md.str();
}

// "barrier in … <- main (x.py:9); group: the default group (world)".
std::string wait_with_arguments(const waits::WaitPoint& w) {
  const std::string arguments = w.arguments();
  return w.describe() + (arguments.empty() ? "" : "; " + arguments);
}

std::string rank_row(const RankEntry& r) {
  const auto* p = r.latest();
  std::string layout = "-";
  if (p) {
    layout = num(p->identity.tp) + "/" + num(p->identity.pp) + "/" + num(p->identity.dp);
  }
  const std::string progressing =
      !r.progress.progressing ? "?" : (*r.progress.progressing ? "yes" : "no");
  return "| " + num(r.rank) + " | " + (p ? cell(r.node) : "-") + " | " +
         (p && r.pid != 0 ? std::to_string(r.pid) : "-") + " | " + layout + " | " + state_label(r) +
         " | " + progressing + " | " +
         (r.stuck_since_ns ? utc_time(*r.stuck_since_ns) + " (" + r.stuck_since_source + ")"
                           : "-") +
         " | " +
         (p && p->dump && !p->dump->threads.empty() ? cell(wait_with_arguments(r.wait)) : "-") +
         " | " + (r.class_id ? std::to_string(r.class_id) : "-") + " |\n";
}

// A row for ranks no entry holds (missing or unknown): one per range, however many ranks.
std::string absent_row(const analysis::RankSet::Interval& ranks, analysis::RankState state) {
  return "| " + analysis::RankSet::range(ranks.first, ranks.last).text() + " | - | - | - | " +
         std::string(to_string(state)) + " | ? | - | - | - |\n";
}

// Each rank's collectives per process group, from its flight recorder (when it left a dump).
std::string collectives_lines(const analysis::Job& job) {
  std::ostringstream md;
  std::size_t shown = 0;
  for (const auto& r : job.ranks) {
    for (const auto& line : r.collectives) {
      if (shown++ == kRankRowsShown) {
        md << "- … more in report.json\n";
        return "Collectives (flight recorder):\n\n" + md.str() + "\n";
      }
      md << "- rank " << *r.rank << ": " << cell(line) << "\n";
    }
  }
  const std::string lines = md.str();
  return lines.empty() ? "" : "Collectives (flight recorder):\n\n" + lines + "\n";
}

std::string ranks_section(const analysis::Analysis& a) {
  std::ostringstream md;
  for (const auto& job : a.jobs) {
    md << "## Ranks of job " << (job.key.empty() ? "(unknown)" : markdown_code(job.key))
       << (job.world_size ? ", world size " + std::to_string(*job.world_size) : "") << "\n\n";
    md << "| rank | node | pid | tp/pp/dp | state | progressing | stuck since | wait point | "
          "class |\n|---|---|---|---|---|---|---|---|---|\n";
    // The entries and the missing ranges, in rank order; the first kRankRowsShown rows.
    const std::uint64_t total = job.ranks.size() + job.missing.size();
    std::uint64_t ranks_shown = 0;
    std::size_t rows = 0;
    bool cut = false;
    const auto row = [&](const std::string& text, std::uint64_t ranks) {
      if (cut) return;
      if (rows++ == kRankRowsShown) {
        md << "\n"
           << total - ranks_shown
           << " more ranks: see the classes below and report.json in the bundle.\n";
        cut = true;
        return;
      }
      md << text;
      ranks_shown += ranks;
    };
    const auto& gaps = job.missing.intervals();
    auto gap = gaps.begin();
    for (const auto& r : job.ranks) {
      for (; gap != gaps.end() && (!r.rank || gap->first < *r.rank); ++gap) {
        row(absent_row(*gap, job.missing_state),
            static_cast<std::uint64_t>(gap->last) - gap->first + 1);
      }
      row(rank_row(r), 1);
    }
    for (; gap != gaps.end(); ++gap) {
      row(absent_row(*gap, job.missing_state),
          static_cast<std::uint64_t>(gap->last) - gap->first + 1);
    }
    md << "\n";
    md << collectives_lines(job);
    if (!job.classes.empty()) {
      md << "Classes (ranks waiting at the same place):\n\n";
      for (const auto& c : job.classes) {
        md << "- class " << c.id << ", " << cell(c.state) << ", rank "
           << analysis::compress_ranks(c.ranks) << ": " << cell(c.description) << "\n";
      }
      md << "\n";
    }
  }
  return md.str();
}

std::string chain_section(const analysis::Analysis& a) {
  std::ostringstream md;
  md << "## Wait-for chain\n\n";
  for (const auto& job : a.jobs) {
    // Edges grouped: the ranks that wait for the same set of ranks, for the same reason.
    std::map<std::pair<analysis::RankSet, std::string>, std::set<int>> edges;
    analysis::RankSet roots_waited;
    for (const auto& r : job.ranks) {
      if (!r.rank || r.waits_for.empty()) continue;
      edges[{r.waits_for, r.waits_for_reason}].insert(*r.rank);
      roots_waited.insert(r.waits_for);
    }
    if (edges.empty()) {
      md << "- job " << markdown_code(job.key) << ": no rank waits for another rank.\n";
      continue;
    }
    for (const auto& [edge, from] : edges) {
      md << "- " << (from.size() == 1 ? "rank " : "ranks ") << analysis::compress_ranks(from)
         << " → " << (edge.first.size() == 1 ? "rank " : "ranks ")
         << analysis::compress_ranks(edge.first) << " (" << cell(edge.second) << ")\n";
    }
    for (const auto* r : job.entries_in(roots_waited)) {
      if (!r->waits_for.empty()) continue;
      md << "- rank " << *r->rank << " waits for no rank: " << to_string(r->state)
         << (r->history.empty() ? "" : ", " + cell(r->wait.describe())) << "\n";
    }
    if (const auto absent = roots_waited & job.missing; !absent.empty()) {
      md << "- " << analysis::ranks_text(absent) << (absent.size() == 1 ? " waits" : " wait")
         << " for no rank: " << to_string(job.missing_state) << "\n";
    }
  }
  md << "\n";
  return md.str();
}

// The serving deployments: API servers → engine cores → workers, front first (docs/report.md).
std::string serving_section(const analysis::Analysis& a) {
  if (a.serving.empty()) return "";
  std::ostringstream md;
  md << "## Serving chain\n\n";
  for (const auto& chain : a.serving) {
    md << "- " << cell(chain.framework) << " deployment"
       << (chain.job.empty()
               ? ", no workers' job linked"
               : ", workers' job " + markdown_code(chain.job) + " (" + cell(chain.job_link) + ")")
       << ":\n";
    for (std::size_t i = 0; i < chain.links.size(); ++i) {
      md << "  " << i + 1 << ". " << cell(chain.links[i]) << "\n";
    }
  }
  md << "\n";
  return md.str();
}

std::string tree_section(const analysis::Analysis& a) {
  std::ostringstream md;
  for (const auto& job : a.jobs) {
    analysis::RankSet diverged;
    for (const auto& v : a.verdicts) {
      if (v.job == job.key) diverged.insert(v.diverged_ranks);
    }
    md << "## Merged call tree of job " << markdown_code(job.key) << "\n\n"
       << fence(tree_text(job, diverged)) << "\n";
  }
  return md.str();
}

std::string stack_text(const model::FrameList& frames) {
  std::string out;
  for (const auto& f : frames) {
    out += (f.kind == model::Frame::Kind::kPython ? "  py  " : "  c   ") +
           printable(analysis::frame_label(f)) + "\n";
  }
  return out;
}

std::string stacks_section(const analysis::Analysis& a) {
  std::ostringstream md;
  md << "## Representative stacks (innermost first)\n\n";
  bool any = false;
  for (const auto& job : a.jobs) {
    for (const auto& c : job.classes) {
      const auto& r = job.ranks[c.representative];
      const auto* frames = analysis::rank_stack(r);
      if (frames == nullptr) continue;
      any = true;
      md << details("class " + std::to_string(c.id) + " (rank " +
                        analysis::compress_ranks(c.ranks) + "): rank " + num(r.rank) + ", thread " +
                        std::to_string(r.wait.tid) + ", " + html_text(c.description),
                    fence(stack_text(*frames)));
    }
  }
  // Flight-recorder dumps alone (post-mortem) give no stacks: said, not left blank.
  if (!any) md << "None: no rank's stack is in this bundle.\n";
  md << "\n";
  return md.str();
}

std::string others_section(const analysis::Analysis& a) {
  if (a.others.empty()) return "";
  std::ostringstream md;
  md << "## Other processes\n\n| role | node | pid | command | job | where |\n"
        "|---|---|---|---|---|---|\n";
  for (const auto& o : a.others) {
    const auto& p = *o.process;
    const auto serving = analysis::serving_role(a, p);
    const std::string role(model::to_string(p.identity.role));
    md << "| " << cell(role)
       << (serving && *serving != role ? " (serving: " + cell(*serving) + ")" : "") << " | "
       << cell(o.node) << " | " << p.pid << " | " << cell(p.comm) << " | " << cell(p.identity.job)
       << " | " << (p.dump ? cell(o.wait.describe()) : "-") << " |\n";
  }
  md << "\n";
  return md.str();
}

std::string nodes_section(const model::Bundle& bundle) {
  const auto latest = model::latest_samples(bundle);
  std::ostringstream md;
  md << "## Nodes\n\n| node | agent | status | hostname | captured (UTC) | clock offset | "
        "processes | notes |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& n : bundle.nodes) {
    const auto it = latest.find(n.name);
    const auto* s = it == latest.end() ? nullptr : it->second;
    std::string notes = n.error;
    if (s) {
      for (const auto& note : s->notes) notes += (notes.empty() ? "" : "; ") + note;
    }
    char offset[32];
    std::snprintf(offset, sizeof offset, "%.1f ms", static_cast<double>(n.clock_offset_ns) / 1e6);
    md << "| " << cell(n.name) << " | " << (n.address ? cell(*n.address) : "-") << " | "
       << cell(model::to_string(n.status)) << " | " << (s ? cell(s->hostname) : "-") << " | "
       << (s ? utc_time(s->capture_unix_ns) : "-") << " | " << (n.address ? offset : "-") << " | "
       << (s ? std::to_string(s->processes.size()) : "-") << " | " << cell(notes) << " |\n";
  }
  md << "\n";
  return md.str();
}

// Facts per node, from its ranks: one line per fact; disagreeing ranks show every value with
// the ranks that hold it. Machine-readable facts (net.tcp) stay in report.json.
std::string facts_section(const analysis::Analysis& a) {
  // node → key → value → ranks
  std::map<std::string, std::map<std::string, std::map<std::string, std::set<int>>>> by_node;
  for (const auto& job : a.jobs) {
    for (const auto& r : job.ranks) {
      const auto* p = r.latest();
      if (p == nullptr) continue;
      for (const auto& [k, v] : p->facts) {
        if (k == model::fact_keys::kNetTcp) continue;
        by_node[r.node][k][v].insert(r.rank.value_or(-1));
      }
    }
  }
  if (by_node.empty()) return "";
  std::ostringstream md;
  md << "## Facts per node (from the ranks' own files)\n\n";
  for (const auto& [node, facts] : by_node) {
    md << "<details><summary>" << html_text(node) << ": " << facts.size()
       << " facts</summary>\n\n| fact | value |\n|---|---|\n";
    for (const auto& [key, values] : facts) {
      std::string text;
      for (const auto& [value, ranks] : values) {
        if (!text.empty()) text += " / ";
        text += value;
        if (values.size() > 1) text += " (ranks " + analysis::compress_ranks(ranks) + ")";
      }
      md << "| " << cell(key) << " | " << cell(text) << " |\n";
    }
    md << "\n</details>\n\n";
  }
  return md.str();
}

// Ranks without the TCP connections the rest of their job has (gloo's full mesh).
std::string network_section(const analysis::Analysis& a) {
  std::ostringstream md;
  for (const auto& job : a.jobs) {
    if (!job.tcp_meshed) continue;
    for (const auto& r : job.ranks) {
      if (r.missing_tcp_peers.empty()) continue;
      md << "- rank " << *r.rank << " (" << cell(r.node) << ") has no TCP connection to "
         << (r.missing_tcp_peers.size() == 1 ? "rank " : "ranks ")
         << analysis::compress_ranks(r.missing_tcp_peers) << "; connected to "
         << (r.tcp_peers.empty() ? "none" : analysis::compress_ranks(r.tcp_peers)) << "\n";
    }
  }
  const std::string lines = md.str();
  if (lines.empty()) return "";
  return "## Network\n\nThe job's ranks are connected to each other over TCP (matched end to "
         "end from each rank's sockets), except:\n\n" +
         lines + "\n";
}

std::string capture_section(const analysis::Analysis& a) {
  std::ostringstream md;
  md << "## How this was captured\n\nhangscope " << kVersion << " (git " << git_revision() << "), "
     << a.samples << " sample(s) per node";
  if (a.samples > 1) {
    md.precision(2);
    md << " " << std::fixed << a.interval_seconds << " s apart";
  }
  md << ". Secrets are masked on the nodes before anything leaves them. The bundle holds "
        "every snapshot (`snapshots/`), `report.json`, `tree.dot` and `stacks.folded`; "
        "`hangscope report BUNDLE` re-runs this analysis.\n";
  return md.str();
}

}  // namespace

std::string markdown_text(std::string_view text) {
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  // At the start of a line (where a caller may put the text: a paragraph, a list item) its first
  // character that is not a space could open a heading, list, quote, fence, thematic break or
  // setext underline; digits followed by '.' or ')' and a space an ordered list.
  const std::size_t lead = std::min(text.find_first_not_of(' '), text.size());
  std::size_t list_mark = std::string_view::npos;
  if (lead < text.size() && std::isdigit(static_cast<unsigned char>(text[lead]))) {
    std::size_t end = lead;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    // "10.0.0.1" is no list: a marker is followed by a space, a tab or nothing.
    if (end < text.size() && (text[end] == '.' || text[end] == ')') &&
        (end + 1 == text.size() || text[end + 1] == ' ' || text[end + 1] == '\t')) {
      list_mark = end;
    }
  }
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    bool escape = false;
    switch (c) {
      case '\\':  // else it could escape the escapes, or a table's own pipe
      case '`':   // code spans
      case '*':   // emphasis
      case '~':   // strikethrough
      case '[':   // links, images, footnotes
      case ']':
      case '&':  // entities
      case '|':  // table cells
      case '$':  // GitHub's math
        escape = true;
        break;
      case '<':  // HTML, comments, autolinks; "<- caller" (a wait point's arrow) opens none
        escape = i + 1 == text.size() ||
                 (text[i + 1] != ' ' && text[i + 1] != '-' && text[i + 1] != '=');
        break;
      case '_':  // between two letters or digits it opens no emphasis: distributed_c10d.py
        escape = i == 0 || i + 1 == text.size() || !word(text[i - 1]) || !word(text[i + 1]);
        break;
      default:
        escape = (i == lead && std::ispunct(static_cast<unsigned char>(c))) || i == list_mark;
    }
    if (escape) out += '\\';
    out += c;
  }
  // Last: control characters and bytes that are not UTF-8 become "\xNN", which Markdown shows as
  // written (a backslash before a letter escapes nothing).
  return printable(out);
}

std::string markdown_code(std::string_view text) {
  const std::string shown = printable(text);
  if (shown.empty()) return "` `";
  const std::string ticks(longest_backtick_run(shown) + 1, '`');
  // A backtick at either end, or spaces at both, would be taken into the delimiter or stripped.
  const bool pad =
      shown.front() == '`' || shown.back() == '`' || (shown.front() == ' ' && shown.back() == ' ');
  const std::string space = pad ? " " : "";
  return ticks + space + shown + space + ticks;
}

std::string report_markdown(const model::Bundle& bundle, const analysis::Analysis& analysis) {
  // In order of importance; a section that does not fit is collapsed to a pointer.
  const std::vector<std::pair<std::string, std::string>> sections = {
      {"verdict", verdict_section(analysis)},
      {"serving", serving_section(analysis)},
      {"diagnostics", diagnostics_section(analysis)},
      {"ranks", ranks_section(analysis)},
      {"chain", chain_section(analysis)},
      {"tree", tree_section(analysis)},
      {"stacks", stacks_section(analysis)},
      {"others", others_section(analysis)},
      {"network", network_section(analysis)},
      {"nodes", nodes_section(bundle)},
      {"facts", facts_section(analysis)},
      {"capture", capture_section(analysis)},
  };
  std::string md;
  for (const auto& [name, text] : sections) {
    if (md.size() + text.size() <= kBodyLimit) {
      md += text;
    } else {
      md += "\n_The " + name + " section (" + std::to_string(text.size()) +
            " characters) does not fit in a ticket: see report.json in the bundle._\n\n";
    }
  }
  return md;
}

}  // namespace hangscope::report
