#include "hangscope/report/bundle_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
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
#include "hangscope/snapshot/codec.h"

namespace hangscope::report {

// Bundles of more nodes keep their snapshots in binary protobuf instead of JSON.
constexpr std::size_t kJsonSnapshotNodes = 64;
namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw_errno("cannot write " + path, errno);
}

void make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    throw_errno("cannot create directory " + path, errno);
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

// Runs Graphviz's dot, bounded in time; false (with why) when it is absent or fails.
bool render_svg(const std::string& dot_file, const std::string& svg_file, std::string& why) {
  const auto result =
      run_program({"dot", "-Tsvg", dot_file, "-o", svg_file}, std::chrono::seconds(30));
  if (!result.ok()) why = result.error;
  return result.ok();
}

}  // namespace

void make_bundle_dirs(const std::string& dir) {
  make_dir(dir);
  make_dir(dir + "/snapshots");
}

void write_bundle_data(const std::string& dir, const analysis::Bundle& bundle) {
  make_bundle_dirs(dir);
  std::map<std::string, std::vector<const snapshot::NodeSnapshot*>> per_node;
  for (const auto& s : bundle.snapshots) per_node[s.node_name].push_back(&s);
  // Readable JSON for the usual few nodes; binary protobuf (a fraction of the size and time)
  // for large jobs. `hangscope report` reads either.
  const std::string extension = per_node.size() > kJsonSnapshotNodes ? ".pb" : ".json";
  std::vector<const std::pair<const std::string, std::vector<const snapshot::NodeSnapshot*>>*>
      files;
  for (const auto& entry : per_node) files.push_back(&entry);
  std::atomic<std::size_t> next{0};
  std::mutex failure_mutex;
  std::string failure;
  const auto work = [&] {
    for (std::size_t i = next++; i < files.size(); i = next++) {
      try {
        snapshot::write_file(dir + "/snapshots/" + file_name(files[i]->first) + extension,
                             files[i]->second);
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
                     {"status", n.status},
                     {"error", n.error},
                     {"clock_offset_ns", n.clock_offset_ns}});
  }
  write_text(dir + "/nodes.json",
             nodes.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::vector<std::string> write_reports(const std::string& dir, const analysis::Bundle& bundle,
                                       const analysis::Analysis& analysis) {
  std::vector<std::string> notes;
  PhaseTimer timer;
  // report.json (the largest) is built and written beside the others.
  std::string json_failure;
  std::thread json_writer([&] {
    try {
      std::ofstream out(dir + "/report.json", std::ios::trunc);
      write_report_json(out, bundle, analysis);
      out.close();
      if (!out) throw_errno("cannot write " + dir + "/report.json", errno);
    } catch (const std::exception& e) {  // nothing may escape a thread
      json_failure = e.what();
    }
  });
  write_text(dir + "/report.md", report_markdown(bundle, analysis));
  timer.lap("report.md");
  write_text(dir + "/tree.dot", tree_dot(analysis));
  write_text(dir + "/stacks.folded", stacks_folded(analysis));
  timer.lap("tree.dot and stacks.folded");
  std::string why;
  if (!render_svg(dir + "/tree.dot", dir + "/tree.svg", why)) {
    notes.push_back("tree.svg not written: " + why);
  }
  timer.lap("tree.svg");
  json_writer.join();
  timer.lap("report.json");
  if (!json_failure.empty()) throw Error(json_failure);
  return notes;
}

analysis::Bundle read_bundle(const std::string& dir, std::size_t max_bytes) {
  analysis::Bundle bundle;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) throw_errno("bundle " + printable(dir), errno);
  if (!S_ISDIR(st.st_mode)) throw Error("bundle " + printable(dir) + ": is not a directory");
  const std::string snapshots = dir + "/snapshots";
  const auto names = list_directory(snapshots);
  if (!names) {
    throw_errno("bundle " + printable(dir) + ": no snapshots/ (not written by diagnose?)", errno);
  }
  std::vector<std::string> files;
  for (const auto& name : *names) files.push_back(snapshots + "/" + name);
  std::map<std::string, analysis::NodeStatus> statuses;
  if (::stat((dir + "/nodes.json").c_str(), &st) == 0) {
    const std::string nodes_file = dir + "/nodes.json";
    const std::string text = read_input_file(nodes_file, "bundle file", max_bytes);
    try {
      for (const auto& n : nlohmann::json::parse(text)) {
        analysis::NodeStatus status;
        status.name = n.at("name").get<std::string>();
        if (!n.at("address").is_null()) status.address = n.at("address").get<std::string>();
        status.status = n.at("status").get<std::string>();
        status.error = n.value("error", "");
        status.clock_offset_ns = n.value("clock_offset_ns", std::int64_t{0});
        statuses[status.name] = status;
        bundle.nodes.push_back(status);
      }
    } catch (const nlohmann::json::exception& e) {
      throw Error("bundle file " + printable(nodes_file) + ": not a node list (" +
                  printable(e.what()) + ")");
    }
  }
  for (const auto& file : files) {
    try {
      for (auto& node : snapshot::read_file(file, max_bytes)) {
        if (!statuses.count(node.node_name)) {
          statuses[node.node_name] = {node.node_name, std::nullopt, "ok", "", 0};
          bundle.nodes.push_back(statuses[node.node_name]);
        }
        bundle.snapshots.push_back(std::move(node));
      }
    } catch (const Error& e) {
      bundle.nodes.push_back({file, std::nullopt, "error", e.what(), 0});
    }
  }
  return bundle;
}

}  // namespace hangscope::report
