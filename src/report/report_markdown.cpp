// report.md: a GitHub issue body. The verdict in its first three lines, then the evidence,
// rank table, wait-for chain, merged tree, representative stacks, other processes, nodes and
// how it was captured. Long parts are collapsed; the whole stays under GitHub's limit.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "hangscope/analysis/call_tree.h"
#include "hangscope/analysis/rank_set.h"
#include "hangscope/facts/fact_keys.h"
#include "hangscope/report/report.h"
#include "hangscope/version.h"

namespace hangscope::report {
namespace {

using analysis::RankEntry;

constexpr std::size_t kBodyLimit = 60000;  // GitHub refuses bodies over 65,536 characters
constexpr std::size_t kRankRowsShown = 256;

// Markdown table cells: no pipes or newlines.
std::string cell(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string num(const std::optional<int>& v) {
  return v ? std::to_string(*v) : "-";
}

std::string fence(const std::string& text) {
  return "```text\n" + text + "```\n";
}

std::string details(const std::string& summary, const std::string& body) {
  return "<details><summary>" + summary + "</summary>\n\n" + body + "\n</details>\n";
}

std::string verdict_section(const analysis::Analysis& a) {
  std::ostringstream md;
  if (a.verdicts.empty()) {
    md << "# hangscope: no divergence found\n\n" << a.conclusion << "\n\n";
    return md.str();
  }
  const auto& top = a.verdicts.front();
  md << "# hangscope: " << top.summary << "\n\n";
  md << "**Verdict `" << top.id << "`** (" << to_string(top.kind) << ", confidence " << std::fixed;
  md.precision(2);
  md << top.confidence << "): " << top.title << ". Diverged: "
     << (top.diverged_ranks.empty() ? "none named"
                                    : "rank " + analysis::compress_ranks(top.diverged_ranks))
     << "; waiting: "
     << (top.waiting_ranks.empty() ? "none" : analysis::compress_ranks(top.waiting_ranks))
     << (top.job.empty() ? "" : " (job " + top.job + ")") << ".\n\n";
  for (const auto& v : a.verdicts) {
    if (&v != &top) {
      md << "**Also `" << v.id << "`** (" << to_string(v.kind) << ", confidence " << v.confidence
         << (v.explained_by.empty() ? "" : ", explained by `" + v.explained_by + "`")
         << "): " << v.summary << "\n\n";
    }
  }
  md << "### Evidence\n\n";
  for (const auto& v : a.verdicts) {
    for (const auto& e : v.evidence)
      md << "- " << (a.verdicts.size() > 1 ? "`" + v.id + "` " : "") << cell(e) << "\n";
  }
  bool any = false;
  for (const auto& v : a.verdicts) {
    for (const auto& r : v.remedies) {
      if (!any) md << "\n### What to do\n\n";
      any = true;
      md << "- " << r << "\n";
    }
  }
  for (const auto& v : a.verdicts) {
    if (!v.references.empty()) {
      md << "\nReferences (`" << v.id << "`): ";
      for (std::size_t i = 0; i < v.references.size(); ++i) {
        md << (i ? ", " : "") << v.references[i];
      }
      md << "\n";
    }
  }
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
    md << "## Ranks of job " << (job.key.empty() ? "(unknown)" : "`" + job.key + "`")
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
        md << "- class " << c.id << ", " << c.state << ", rank "
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
      md << "- job `" << job.key << "`: no rank waits for another rank.\n";
      continue;
    }
    for (const auto& [edge, from] : edges) {
      md << "- " << (from.size() == 1 ? "rank " : "ranks ") << analysis::compress_ranks(from)
         << " → " << (edge.first.size() == 1 ? "rank " : "ranks ")
         << analysis::compress_ranks(edge.first) << " (" << edge.second << ")\n";
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
    md << "- " << chain.framework << " deployment"
       << (chain.job.empty() ? ", no workers' job linked"
                             : ", workers' job `" + chain.job + "` (" + chain.job_link + ")")
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
    md << "## Merged call tree of job `" << job.key << "`\n\n"
       << fence(tree_text(job, diverged)) << "\n";
  }
  return md.str();
}

std::string stack_text(const std::vector<model::Frame>& frames) {
  std::string out;
  for (const auto& f : frames) {
    out += (f.kind == model::Frame::Kind::kPython ? "  py  " : "  c   ") +
           analysis::frame_label(f) + "\n";
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
                        std::to_string(r.wait.tid) + ", " + cell(c.description),
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
    md << "| " << p.identity.role << (serving ? " (serving: " + *serving + ")" : "") << " | "
       << cell(o.node) << " | " << p.pid << " | " << cell(p.comm) << " | " << cell(p.identity.job)
       << " | " << (p.dump ? cell(o.wait.describe()) : "-") << " |\n";
  }
  md << "\n";
  return md.str();
}

std::string nodes_section(const Bundle& bundle) {
  const auto latest = analysis::latest_samples(bundle);
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
    md << "| " << cell(n.name) << " | " << (n.address ? cell(*n.address) : "-") << " | " << n.status
       << " | " << (s ? cell(s->hostname) : "-") << " | "
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
        if (k == facts::keys::kNetTcp) continue;
        by_node[r.node][k][v].insert(r.rank.value_or(-1));
      }
    }
  }
  if (by_node.empty()) return "";
  std::ostringstream md;
  md << "## Facts per node (from the ranks' own files)\n\n";
  for (const auto& [node, facts] : by_node) {
    md << "<details><summary>" << cell(node) << ": " << facts.size()
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

std::string report_markdown(const Bundle& bundle, const analysis::Analysis& analysis) {
  // In order of importance; a section that does not fit is collapsed to a pointer.
  const std::vector<std::pair<std::string, std::string>> sections = {
      {"verdict", verdict_section(analysis)}, {"serving", serving_section(analysis)},
      {"ranks", ranks_section(analysis)},     {"chain", chain_section(analysis)},
      {"tree", tree_section(analysis)},       {"stacks", stacks_section(analysis)},
      {"others", others_section(analysis)},   {"network", network_section(analysis)},
      {"nodes", nodes_section(bundle)},       {"facts", facts_section(analysis)},
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
