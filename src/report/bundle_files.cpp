#include "hangscope/report/bundle_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/common/subprocess.h"
#include "hangscope/common/text.h"
#include "hangscope/report/report.h"
#include "hangscope/snapshot/bundle_layout.h"
#include "hangscope/snapshot/codec.h"

namespace hangscope::report {

using snapshot::is_new_file_of_snapshot;
using snapshot::is_snapshot_file_name;
using snapshot::kBundleFiles;
using snapshot::kSnapshotsDir;

// Bundles of more nodes keep their snapshots in binary protobuf instead of JSON.
constexpr std::size_t kJsonSnapshotNodes = 64;
namespace {

// The largest tree.svg kept: dot's output beyond it is no picture anyone opens.
constexpr std::size_t kMaxSvgBytes = std::size_t{64} << 20;

std::string in_bundle(const std::string& dir, std::string_view name) {
  return dir + "/" + std::string(name);
}

// A bundle file, written by replacing what is at its name.
void write_text(const std::string& dir, std::string_view name, const std::string& text) {
  write_file_replacing(in_bundle(dir, name), text);
}

// Creates a directory of the bundle; an existing one must be a directory, not a link to one.
void make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0) return;
  const int err = errno;
  struct stat st {};
  if (err != EEXIST) throw_errno("cannot create directory " + printable(path), err);
  if (::lstat(path.c_str(), &st) != 0) {
    throw_errno("cannot create directory " + printable(path), errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    throw Error("cannot create directory " + printable(path) + ": it exists and " +
                describe_file_type(st.st_mode));
  }
}

// A file name for a node: its name with anything but [A-Za-z0-9._-] replaced.
std::string file_name(const std::string& node) {
  std::string out = node.empty() ? "node" : node;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  }
  return out;
}

// Runs Graphviz's dot, bounded in time and output; its SVG is written like every bundle file
// (dot's own -o would write through a link). False (with why) when it is absent or fails.
bool render_svg(const std::string& dot_file, const std::string& svg_file, std::string& why) {
  const auto result =
      run_program({"dot", "-Tsvg", dot_file}, std::chrono::seconds(30), kMaxSvgBytes);
  if (!result.ok()) {
    why = result.error;
    return false;
  }
  if (result.output.size() >= kMaxSvgBytes) {
    why = "dot's SVG is larger than " + describe_size(kMaxSvgBytes);
    return false;
  }
  write_file_replacing(svg_file, result.output);
  return true;
}

// ".NODE.json.new-PID-N": the new file of an interrupted write of a snapshot file.
bool is_bundle_file_name(std::string_view name) {
  for (const auto file : kBundleFiles) {
    if (name == file || is_replacement_of(name, file)) return true;
  }
  return false;
}

// The entries of an open directory, sorted; throws naming `dir` (an -o directory).
std::vector<std::string> entries_of(int dir_fd, const std::string& dir) {
  int error = 0;
  auto names = list_directory_at(dir_fd, &error);
  if (!names) throw_errno("-o " + printable(dir) + ": cannot list it", error);
  return std::move(*names);
}

bool is_regular_at(int dir_fd, const std::string& name) {
  struct stat st {};
  return ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::string remove_earlier_bundle(const std::string& dir) {
  const std::string what = "-o " + printable(dir);
  const FileDescriptor top(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!top) throw_errno(what + ": cannot open it", errno);
  // First every entry is checked; only a directory that is all bundle loses anything.
  std::vector<std::string> files;
  FileDescriptor snapshots;
  std::vector<std::string> snapshot_files;
  for (const auto& name : entries_of(top.get(), dir)) {
    if (name == kSnapshotsDir) {
      snapshots.reset(
          ::openat(top.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!snapshots) return name;  // a link, a file: nothing a bundle writes
      for (const auto& entry : entries_of(snapshots.get(), dir + "/" + name)) {
        if (!(is_snapshot_file_name(entry) || is_new_file_of_snapshot(entry)) ||
            !is_regular_at(snapshots.get(), entry)) {
          return name + "/" + entry;
        }
        snapshot_files.push_back(entry);
      }
    } else if (is_bundle_file_name(name) && is_regular_at(top.get(), name)) {
      files.push_back(name);
    } else {
      return name;
    }
  }
  const auto remove = [&](int at, const std::string& name, const std::string& shown, int flags) {
    if (::unlinkat(at, name.c_str(), flags) != 0 && errno != ENOENT) {
      throw_errno(what + ": cannot remove " + printable(shown), errno);
    }
  };
  for (const auto& name : snapshot_files) {
    remove(snapshots.get(), name, std::string(kSnapshotsDir) + "/" + name, 0);
  }
  if (snapshots) {
    remove(top.get(), std::string(kSnapshotsDir), std::string(kSnapshotsDir), AT_REMOVEDIR);
  }
  for (const auto& name : files) remove(top.get(), name, name, 0);
  return "";
}

void make_bundle_dirs(const std::string& dir) {
  make_dir(dir);
  make_dir(in_bundle(dir, kSnapshotsDir));
}

void write_bundle_data(const std::string& dir, const model::Bundle& bundle,
                       ProgressMeter::Task* task) {
  make_bundle_dirs(dir);
  std::map<std::string, std::vector<const model::NodeSnapshot*>> per_node;
  for (const auto& s : bundle.snapshots) per_node[s.node_name].push_back(&s);
  // Readable JSON for the usual few nodes; binary protobuf (a fraction of the size and time)
  // for large jobs. `hangscope report` reads either.
  const std::string extension = per_node.size() > kJsonSnapshotNodes ? ".pb" : ".json";
  std::vector<const std::pair<const std::string, std::vector<const model::NodeSnapshot*>>*> files;
  for (const auto& entry : per_node) files.push_back(&entry);
  if (task != nullptr) task->stage("writing the bundle's snapshot files", files.size());
  std::atomic<std::size_t> next{0};
  std::mutex failure_mutex;
  std::string failure;
  const auto work = [&] {
    for (std::size_t i = next++; i < files.size(); i = next++) {
      try {
        snapshot::write_file(
            in_bundle(dir, kSnapshotsDir) + "/" + file_name(files[i]->first) + extension,
            files[i]->second);
        if (task != nullptr) task->add_done(1);
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (failure.empty()) failure = e.what();
      }
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t w = 1; w < std::min<std::size_t>(4, files.size()); ++w)
    workers.emplace_back(work);
  work();
  for (auto& w : workers) w.join();
  if (!failure.empty()) throw Error(failure);
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : bundle.nodes) {
    nodes.push_back({{"name", n.name},
                     {"address", n.address ? nlohmann::json(*n.address) : nlohmann::json()},
                     {"status", model::to_string(n.status)},
                     {"error", n.error},
                     {"clock_offset_ns", n.clock_offset_ns}});
  }
  write_text(dir, "nodes.json",
             nodes.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::vector<std::string> write_reports(const std::string& dir, const model::Bundle& bundle,
                                       const analysis::Analysis& analysis) {
  std::vector<std::string> notes;
  PhaseTimer timer;
  // report.json (the largest) is built and written beside the others.
  std::string json_failure;
  std::thread json_writer([&] {
    try {
      ReplacingFile out(in_bundle(dir, "report.json"));
      write_report_json(out.stream(), bundle, analysis);
      out.commit();
    } catch (const std::exception& e) {  // nothing may escape a thread
      json_failure = e.what();
    }
  });
  // The writer thread is joined on every path out, a failed write here included.
  std::string failure;
  try {
    write_text(dir, "report.md", report_markdown(bundle, analysis));
    timer.lap("report.md");
    write_text(dir, "tree.dot", tree_dot(analysis));
    write_text(dir, "stacks.folded", stacks_folded(analysis));
    timer.lap("tree.dot and stacks.folded");
    std::string why;
    if (!render_svg(in_bundle(dir, "tree.dot"), in_bundle(dir, "tree.svg"), why)) {
      notes.push_back("tree.svg not written: " + why);
    }
    timer.lap("tree.svg");
  } catch (const std::exception& e) {
    failure = e.what();
  }
  json_writer.join();
  timer.lap("report.json");
  if (!failure.empty()) throw Error(failure);
  if (!json_failure.empty()) throw Error(json_failure);
  return notes;
}

}  // namespace hangscope::report
