#include "hangscope/report/bundle_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/subprocess.h"
#include "hangscope/report/report.h"
#include "hangscope/snapshot/codec.h"

namespace hangscope::report {
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

void write_bundle_data(const std::string& dir, const analysis::Bundle& bundle) {
  make_dir(dir);
  make_dir(dir + "/snapshots");
  std::map<std::string, std::vector<capture::NodeSnapshot>> per_node;
  for (const auto& s : bundle.snapshots) per_node[s.node_name].push_back(s);
  for (const auto& [node, snapshots] : per_node) {
    snapshot::write_file(dir + "/snapshots/" + file_name(node) + ".json", snapshots);
  }
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : bundle.nodes) {
    nodes.push_back({{"name", n.name},
                     {"address", n.address ? nlohmann::json(*n.address) : nlohmann::json()},
                     {"status", n.status},
                     {"error", n.error},
                     {"clock_offset_ns", n.clock_offset_ns}});
  }
  write_text(dir + "/nodes.json", nodes.dump(2) + "\n");
}

std::vector<std::string> write_reports(const std::string& dir, const analysis::Bundle& bundle,
                                       const analysis::Analysis& analysis) {
  std::vector<std::string> notes;
  write_text(dir + "/report.json", report_json(bundle, analysis).dump(2) + "\n");
  write_text(dir + "/report.md", report_markdown(bundle, analysis));
  write_text(dir + "/tree.dot", tree_dot(analysis));
  write_text(dir + "/stacks.folded", stacks_folded(analysis));
  std::string why;
  if (!render_svg(dir + "/tree.dot", dir + "/tree.svg", why)) {
    notes.push_back("tree.svg not written: " + why);
  }
  return notes;
}

analysis::Bundle read_bundle(const std::string& dir) {
  analysis::Bundle bundle;
  const std::string snapshots = dir + "/snapshots";
  const auto names = list_directory(snapshots);
  if (!names) throw_errno("cannot read the bundle " + dir + " (no snapshots/)", errno);
  std::vector<std::string> files;
  for (const auto& name : *names) files.push_back(snapshots + "/" + name);
  std::map<std::string, analysis::NodeStatus> statuses;
  std::ifstream nodes_in(dir + "/nodes.json");
  if (nodes_in) {
    try {
      for (const auto& n : nlohmann::json::parse(nodes_in)) {
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
      throw Error(dir + "/nodes.json: not a node list (" + e.what() + ")");
    }
  }
  for (const auto& file : files) {
    try {
      for (auto& node : snapshot::read_file(file)) {
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
