// Text from targets, files and peers in every text rendering (issue 30, item 10): frames,
// threads, files, node names, job keys and notes that carry an escape sequence, a newline and a
// forged report heading, Markdown fences, pipes, HTML, links, C1 controls and bytes that are not
// UTF-8. Text output shows them escaped (no raw control byte, no line of their own), report.md
// keeps its own structure (its first line is the real verdict, no forged heading, balanced
// fences, table rows with their own cells), and JSON keeps the exact bytes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "analysis_builders.h"
#include "hangscope/common/text.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/report/dump_format.h"
#include "hangscope/report/report.h"

namespace hangscope::report {
namespace {

using namespace analysis::testing_builders;

// Each string a target, file or peer could hand over.
const std::string kForged = "w\x1b[2Jq\n# hangscope: no divergence found";
const std::string kFence = "x\n```\n<script>alert(1)</script>";
const std::string kTable =
    "a|b` | c ``` [click](https://evil.example) ![i](https://evil.example/i)";
const std::string kControls =
    "bell\x07 del\x7f csi\xc2\x9b"
    "31m osc\x1b]0;title\x07 cr\r";
const std::string kNotUtf8 = "bad\xff\xfe\xc3";
const std::string kHostileFile = "/srv/app/\x1b[31mred\n- item|x.py";

std::vector<std::string> report_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The first byte of `text` that a terminal or a Markdown reader could take for more than text:
// a C0 control other than `allowed`, DEL, a C1 control (U+0080-U+009F), or a byte that is not
// valid UTF-8; npos when there is none.
std::size_t raw_control(const std::string& text, const std::string& allowed = "\n") {
  if (const auto valid = valid_utf8(text); valid != text) {
    std::size_t i = 0;
    while (i < text.size() && i < valid.size() && text[i] == valid[i]) ++i;
    return i;
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && allowed.find(static_cast<char>(c)) == std::string::npos) || c == 0x7f) {
      return i;
    }
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
      return i;
    }
  }
  return std::string::npos;
}

// Not valid UTF-8 at all: valid_utf8 changes it.
bool is_utf8(const std::string& text) {
  return valid_utf8(text) == text;
}

// A job of 4 ranks on two nodes where rank 2 waits at a store key while the others wait for it
// in a barrier; every string a snapshot carries is hostile.
model::Bundle hostile_bundle() {
  JobBuilder job(4, "127.0.0.1:29500" + kForged);
  for (int r = 0; r < 4; ++r) {
    if (r == 2) {
      auto frames = store_wait_stack(r);
      frames[3].function = frames[3].qualname = kForged;  // the waiting frame
      frames[3].file = kHostileFile;
      frames[4].function = frames[4].qualname = kFence + kNotUtf8;
      frames[0].function = kTable + kControls;
      job.rank(r, frames);
    } else {
      job.rank(r, barrier_stack());
    }
    job.fact(r, "version.torch", kTable + kControls);
  }
  auto bundle = job.bundle();
  const std::string node = "node1" + kForged + kTable + "<b>";
  for (auto& status : bundle.nodes) {
    if (status.name != "node1") continue;
    status.name = node;
    status.address = "10.0.0.1:7447" + kControls;
  }
  for (auto& s : bundle.snapshots) {
    if (s.node_name == "node1") {
      s.node_name = node;
      s.hostname = kFence;
      s.notes.push_back(kForged + kNotUtf8);
    }
    for (auto& p : s.processes) {
      p.comm = kForged;
      p.dump->threads[0].name = kControls;
    }
  }
  // A process that is no rank, with a hostile command.
  auto other = bundle.snapshots.front().processes.front();
  other.pid = 77;
  other.identity = {};
  other.identity.role = model::ProcessRole::kUnidentified;
  other.comm = kTable;
  other.dump->threads[0].frames.edit([](auto& frames) { frames[3].function = kForged; });
  for (auto& s : bundle.snapshots) {
    if (s.node_name == "node0") s.processes.push_back(other);
  }
  return bundle;
}

// The headings report.md writes itself.
bool own_heading(const std::string& line, std::size_t index) {
  if (index == 0) return line.rfind("# hangscope: ", 0) == 0;
  for (const char* heading :
       {"## Diagnostics", "## Serving chain", "## Ranks of job ", "## Wait-for chain",
        "## Merged call tree of job ", "## Representative stacks", "## Other processes",
        "## Network", "## Nodes", "## Facts per node", "## How this was captured", "### Evidence",
        "### What to do"}) {
    if (line.rfind(heading, 0) == 0) return true;
  }
  return false;
}

// The pipes that split a table row into cells: not escaped, not inside a code span.
std::size_t cell_pipes(const std::string& row) {
  std::size_t pipes = 0;
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (row[i] == '\\') {
      ++i;
    } else if (row[i] == '|') {
      ++pipes;
    }
  }
  return pipes;
}

TEST(ForeignText, MarkdownTextEscapesWhatMarkdownWouldRead) {
  EXPECT_EQ(markdown_text("# hangscope: forged"), "\\# hangscope: forged");
  EXPECT_EQ(markdown_text("  - item"), "  \\- item");
  EXPECT_EQ(markdown_text("12. item"), "12\\. item");
  EXPECT_EQ(markdown_text("3)"), "3\\)");
  EXPECT_EQ(markdown_text("10.0.0.1:7447"), "10.0.0.1:7447");
  EXPECT_EQ(markdown_text("```"), "\\`\\`\\`");
  EXPECT_EQ(markdown_text("a|b"), "a\\|b");
  EXPECT_EQ(markdown_text("<img src=x>"), "\\<img src=x>");
  EXPECT_EQ(markdown_text("> quote"), "\\> quote");
  EXPECT_EQ(markdown_text("barrier (a.py:3) <- main (b.py:9)"),
            "barrier (a.py:3) <- main (b.py:9)");
  EXPECT_EQ(markdown_text("[a](b)"), "\\[a\\](b)");
  EXPECT_EQ(markdown_text("x\\"), "x\\\\");
  EXPECT_EQ(markdown_text("a\nb\x1b"), "a\\x0ab\\x1b");
  // Underscores inside a word open no emphasis and stay readable.
  EXPECT_EQ(markdown_text("distributed_c10d.py"), "distributed_c10d.py");
  EXPECT_EQ(markdown_text("__init__ (x.py:3)"), "\\_\\_init\\_\\_ (x.py:3)");
  EXPECT_EQ(markdown_text("barrier (distributed_c10d.py:3152)"),
            "barrier (distributed_c10d.py:3152)");
}

TEST(ForeignText, MarkdownCodeIsDelimitedByMoreBackticksThanItHolds) {
  EXPECT_EQ(markdown_code("127.0.0.1:29500"), "`127.0.0.1:29500`");
  EXPECT_EQ(markdown_code("a`b"), "``a`b``");
  EXPECT_EQ(markdown_code("```x"), "```` ```x ````");
  EXPECT_EQ(markdown_code("x\ny"), "`x\\x0ay`");
  EXPECT_EQ(markdown_code(""), "` `");
}

TEST(ForeignText, DumpTextShowsEveryNameEscaped) {
  model::ProcessDump dump;
  dump.pid = 42;
  dump.command = kForged;
  dump.notes = {kFence};
  model::ThreadDump thread;
  thread.tid = 43;
  thread.name = kControls;
  thread.state = '\x1b';
  thread.wchan = kForged;
  thread.py_thread_name = kTable + kNotUtf8;
  thread.notes = {kForged};
  thread.kernel_stack = {kForged};
  model::Frame py;
  py.kind = model::Frame::Kind::kPython;
  py.function = py.qualname = kForged;
  py.file = kHostileFile;
  py.line = 3;
  py.locals = {{kForged, kControls + kNotUtf8}};
  model::Frame native;
  native.function = kForged;
  native.module = kFence;
  thread.frames = {native, py};
  dump.threads.push_back(thread);
  model::AsyncTask task;
  task.name = kForged;
  task.tid = 43;
  task.awaits = kControls;
  task.notes = {kForged};
  task.coroutine = {py};
  dump.tasks.push_back(task);
  model::DistributedState distributed;
  distributed.init_method = kForged;
  distributed.notes = {kForged};
  model::ProcessGroupState group;
  group.name = kForged;
  group.backend = kControls;
  group.labels = {kTable};
  distributed.groups.push_back(group);
  dump.distributed = distributed;
  model::Socket socket;
  socket.family = model::Socket::Family::kTcp;
  socket.state = model::SocketState::kEstablished;
  socket.local = kForged + kControls;
  socket.remote = kNotUtf8;
  dump.sockets.push_back(socket);

  const auto text = dump_to_text(dump);
  EXPECT_EQ(raw_control(text), std::string::npos)
      << "raw byte at " << raw_control(text) << ": " << printable(text);
  EXPECT_TRUE(is_utf8(text));
  for (const auto& line : report_lines(text)) {
    EXPECT_NE(line.rfind("# hangscope", 0), 0u) << line;
    EXPECT_NE(line.rfind("```", 0), 0u) << line;
  }
  EXPECT_NE(text.find("w\\x1b[2Jq\\x0a# hangscope: no divergence found"), std::string::npos)
      << text;
  EXPECT_NE(text.find("bad\\xff\\xfe\\xc3"), std::string::npos) << text;
  EXPECT_NE(text.find("csi\\xc2\\x9b31m"), std::string::npos) << text;
  // JSON keeps the bytes: control characters exactly, bytes that are not UTF-8 as U+FFFD
  // (docs/reliability.md, "One policy for text from outside").
  const auto json = nlohmann::json::parse(
      dump_to_json(dump).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  const auto& frame = json["threads"][0]["frames"][1];
  EXPECT_EQ(frame["function"], kForged);
  EXPECT_EQ(frame["file"], kHostileFile);
  EXPECT_EQ(json["threads"][0]["name"], kControls);
  EXPECT_EQ(json["threads"][0]["py_thread_name"], valid_utf8(kTable + kNotUtf8));
}

TEST(ForeignText, ReportMarkdownKeepsItsOwnStructure) {
  const auto bundle = hostile_bundle();
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  ASSERT_EQ(a.verdicts.front().diverged_ranks.text(), "2");
  const auto md = report_markdown(bundle, a);
  EXPECT_EQ(raw_control(md), std::string::npos)
      << "raw byte at " << raw_control(md) << ": " << printable(md.substr(raw_control(md), 80));
  EXPECT_TRUE(is_utf8(md));
  const auto lines = report_lines(md);
  ASSERT_GT(lines.size(), 3u);
  // The first line is the real verdict, naming the hostile frame escaped.
  EXPECT_EQ(lines[0].rfind("# hangscope: Rank 2 ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("w\\x1b\\[2Jq\\x0a# hangscope: no divergence found"), std::string::npos)
      << lines[0];
  std::size_t fences = 0;
  std::string open;  // the fence of the block we are in
  std::size_t table_columns = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto& line = lines[i];
    SCOPED_TRACE("line " + std::to_string(i + 1) + ": " + line);
    const auto ticks = line.find_first_not_of('`');
    if (!open.empty()) {  // inside a fence: only its own closing line ends it
      if (line.rfind(open, 0) == 0 && line.find_first_not_of('`') == std::string::npos) {
        open.clear();
      }
      continue;
    }
    if (ticks >= 3 && ticks != std::string::npos) {
      EXPECT_EQ(line.substr(ticks), "text");  // every block report.md opens is ours
      open = line.substr(0, ticks);
      ++fences;
      continue;
    }
    // Outside fences no line, nor a list item's content, starts a heading, quote, fence or
    // HTML of the input's: the only headings and tags are report.md's own.
    std::string content = line.substr(std::min(line.find_first_not_of(' '), line.size()));
    for (const char* marker : {"- ", "1. ", "2. ", "3. "}) {
      if (content.rfind(marker, 0) == 0) {
        content = content.substr(std::string(marker).size());
      }
    }
    if (!content.empty() && content[0] == '#') {
      EXPECT_TRUE(own_heading(line, i));
    }
    EXPECT_NE(content.rfind(">", 0), 0u);
    EXPECT_NE(content.rfind("~~~", 0), 0u);
    for (std::size_t at = line.find('<'); at != std::string::npos; at = line.find('<', at + 1)) {
      if (at > 0 && line[at - 1] == '\\') continue;
      if (line.compare(at, 3, "<- ") == 0) continue;  // a wait point's arrow opens nothing
      const auto tag = line.substr(at);
      EXPECT_TRUE(tag.rfind("<details>", 0) == 0 || tag.rfind("<summary>", 0) == 0 ||
                  tag.rfind("</summary>", 0) == 0 || tag.rfind("</details>", 0) == 0)
          << tag;
    }
    // Links and images; inside an HTML block (<details><summary>) Markdown is not read at all.
    if (line.rfind("<details>", 0) != 0) {
      EXPECT_EQ(line.find("[click]("), std::string::npos);
      EXPECT_EQ(line.find("![i]("), std::string::npos);
    }
    // Table rows keep the cells of their header.
    if (line.rfind("| ", 0) == 0) {
      if (table_columns == 0) table_columns = cell_pipes(line);
      EXPECT_EQ(cell_pipes(line), table_columns);
    } else {
      table_columns = 0;
    }
  }
  EXPECT_TRUE(open.empty()) << "a fence left open: " << open;
  EXPECT_GE(fences, 2u);  // the merged tree and a representative stack
  // The hostile texts are all there, escaped.
  EXPECT_NE(md.find("node1w\\x1b\\[2Jq\\x0a# hangscope: no divergence found"), std::string::npos);
  EXPECT_NE(md.find("bad\\xff\\xfe\\xc3"), std::string::npos);
  EXPECT_NE(md.find("\\[click\\](https://evil.example)"), std::string::npos);
  EXPECT_NE(md.find("!\\[i\\](https://evil.example/i)\\<b>"), std::string::npos);  // a cell
  EXPECT_NE(md.find("![i](https://evil.example/i)&lt;b&gt;: 1 facts</summary>"),
            std::string::npos);  // in an HTML block, as text
}

TEST(ForeignText, TerminalTreeDotAndFoldedStacksShowNoRawControlByte) {
  const auto bundle = hostile_bundle();
  const auto a = diagnosis::diagnose(bundle);
  const auto plain = terminal_summary(a, false);
  EXPECT_EQ(raw_control(plain), std::string::npos) << printable(plain);
  EXPECT_TRUE(is_utf8(plain));
  EXPECT_NE(plain.find("w\\x1b[2Jq\\x0a# hangscope: no divergence found"), std::string::npos)
      << plain;
  // In colour, the only escape sequences are the colours' own ("\x1b[1;31m" … "\x1b[0m").
  std::string coloured = terminal_summary(a, true);
  for (std::size_t at = coloured.find('\x1b'); at != std::string::npos;
       at = coloured.find('\x1b', at)) {
    const auto end = coloured.find('m', at);
    ASSERT_NE(end, std::string::npos);
    const auto code = coloured.substr(at + 1, end - at);
    EXPECT_TRUE(code == "[0m" || code == "[1m" || code == "[1;31m" || code == "[1;32m") << code;
    coloured.erase(at, end - at + 1);
  }
  EXPECT_EQ(raw_control(coloured), std::string::npos);

  const auto dot = tree_dot(a);
  EXPECT_EQ(raw_control(dot), std::string::npos) << printable(dot);
  EXPECT_TRUE(is_utf8(dot));
  for (const auto& line : report_lines(dot)) {
    // Every quote of a line is DOT's own: the label's are escaped.
    std::size_t quotes = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\\') {
        ++i;
      } else if (line[i] == '"') {
        ++quotes;
      }
    }
    EXPECT_EQ(quotes % 2, 0u) << line;
  }
  const auto tree = tree_text(a.jobs.front());
  EXPECT_EQ(raw_control(tree), std::string::npos) << printable(tree);

  const auto folded = stacks_folded(a);
  EXPECT_EQ(raw_control(folded), std::string::npos) << printable(folded);
  const auto folded_lines = report_lines(folded);
  EXPECT_EQ(folded_lines.size(), 4u) << folded;  // one stack per rank
  for (const auto& line : folded_lines) {
    EXPECT_EQ(line.rfind("job 127.0.0.1:29500w\\x1b[2Jq\\x0a# hangscope: ", 0), 0u) << line;
  }
}

TEST(ForeignText, ReportJsonKeepsTheExactText) {
  const auto bundle = hostile_bundle();
  const auto a = diagnosis::diagnose(bundle);
  std::ostringstream out;
  write_report_json(out, bundle, a);
  const auto json = nlohmann::json::parse(out.str());
  const nlohmann::json* rank2 = nullptr;
  for (const auto& r : json["ranks"]) {
    if (r["rank"] == 2) rank2 = &r;
  }
  ASSERT_NE(rank2, nullptr);
  EXPECT_EQ((*rank2)["wait_point"]["function"], kForged);
  EXPECT_EQ((*rank2)["wait_point"]["file"], kHostileFile);
  EXPECT_EQ((*rank2)["node"], "node1" + kForged + kTable + "<b>");
  EXPECT_EQ((*rank2)["job"], "127.0.0.1:29500" + kForged);
  EXPECT_NE(json["conclusion"].get<std::string>().find(kForged), std::string::npos);
}

}  // namespace
}  // namespace hangscope::report
