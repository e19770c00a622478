// Sources that read snapshots written before: snapshot files (collect --once, an agent's
// answer saved) and a bundle directory diagnose wrote.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/text.h"
#include "hangscope/snapshot/bundle_layout.h"
#include "hangscope/snapshot/codec.h"
#include "hangscope/sources/sources.h"
#include "node_answers.h"

namespace hangscope::sources {
namespace {

std::string in_bundle(const std::string& dir, std::string_view name) {
  return dir + "/" + std::string(name);
}

}  // namespace

model::Bundle from_snapshot_files(const std::vector<std::string>& files,
                                  std::size_t max_input_bytes, const Feedback& feedback) {
  // Files are parsed in parallel, then taken in the order given.
  struct Read {
    std::vector<model::NodeSnapshot> nodes;
    std::string error;
  };
  std::vector<Read> reads(files.size());
  std::atomic<std::size_t> next{0};
  // The files' snapshots share what they repeat (frames, stacks, facts, sockets, log lines).
  snapshot::Interner interner;
  auto all = files.size() > 1 ? feedback.start("reading snapshot files", "", files.size())
                              : ProgressMeter::Task();
  const auto work = [&] {
    for (std::size_t i = next++; i < files.size(); i = next++) {
      try {
        auto task = feedback.start("reading", files[i]);
        reads[i].nodes =
            snapshot::read_file(files[i], max_input_bytes, Links::kFollow, &task, &interner);
      } catch (const std::exception& e) {  // nothing may escape a thread
        reads[i].error = e.what();
      }
      all.add_done(1);
    }
  };
  std::vector<std::thread> workers;
  const std::size_t parallel =
      std::min<std::size_t>(files.size(), std::max(1u, std::thread::hardware_concurrency()));
  for (std::size_t w = 1; w < parallel; ++w) workers.emplace_back(work);
  work();
  for (auto& w : workers) w.join();
  all.end();
  if (files.size() > 16) {  // one line for them all (each file's below, for a few)
    std::size_t snapshots = 0;
    for (const auto& r : reads) snapshots += r.nodes.size();
    feedback.say("read " + std::to_string(snapshots) + " snapshot(s) from " +
                 std::to_string(files.size()) + " files");
  }
  // A node per file and node name in it; the same name in two files is two nodes, named apart.
  std::vector<model::NodeAnswer> answers;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto& file = files[i];
    try {
      if (!reads[i].error.empty()) throw Error(reads[i].error);
      auto& nodes = reads[i].nodes;
      if (files.size() <= 16) {
        feedback.say("read " + std::to_string(nodes.size()) + " snapshot(s) from " + file);
      }
      const std::size_t first = answers.size();
      for (auto& node : nodes) {
        auto it = std::find_if(answers.begin() + static_cast<std::ptrdiff_t>(first), answers.end(),
                               [&](const auto& a) { return a.status.name == node.node_name; });
        if (it == answers.end()) {
          answers.push_back(
              {{node.node_name, std::nullopt, model::NodeState::kOk, "", 0}, file, {}});
          it = answers.end() - 1;
        }
        it->samples.push_back(std::move(node));
      }
    } catch (const Error& e) {
      // A bad file is reported (an error, even with --quiet); the other files still make the
      // report, which names it.
      answers.push_back({{file, std::nullopt, model::NodeState::kError, e.what(), 0}, file, {}});
      feedback.error(e.what());
    }
  }
  return assemble(std::move(answers), feedback);
}

model::Bundle from_bundle_dir(const std::string& dir, std::size_t max_bytes, ProgressMeter* meter) {
  model::Bundle bundle;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) throw_errno("bundle " + printable(dir), errno);
  if (!S_ISDIR(st.st_mode)) throw Error("bundle " + printable(dir) + ": is not a directory");
  const std::string snapshots = in_bundle(dir, snapshot::kSnapshotsDir);
  // snapshots/ and nodes.json are looked at, never followed: a link there would read (and
  // report) a file outside the bundle.
  if (::lstat(snapshots.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    throw Error("bundle " + printable(dir) + ": snapshots " + describe_file_type(st.st_mode));
  }
  const auto names = list_directory(snapshots);
  if (!names) {
    throw_errno("bundle " + printable(dir) + ": no snapshots/ (not written by diagnose?)", errno);
  }
  std::vector<std::string> files;
  for (const auto& name : *names) {
    if (!snapshot::is_new_file_of_snapshot(name)) files.push_back(snapshots + "/" + name);
  }
  std::map<std::string, model::NodeStatus> statuses;
  const std::string nodes_file = in_bundle(dir, "nodes.json");
  if (::lstat(nodes_file.c_str(), &st) == 0) {
    const std::string text = read_input_file(nodes_file, "bundle file", max_bytes,
                                             InputKind::kRegularFile, Links::kRefuse);
    try {
      for (const auto& n : nlohmann::json::parse(text)) {
        model::NodeStatus status;
        status.name = n.at("name").get<std::string>();
        if (!n.at("address").is_null()) status.address = n.at("address").get<std::string>();
        status.status = model::parse_node_state(n.at("status").get<std::string>());
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
  snapshot::Interner interner;  // what the bundle's snapshots repeat, held once
  for (const auto& file : files) {
    try {
      auto task = meter != nullptr ? meter->start("reading", file) : ProgressMeter::Task();
      for (auto& node : snapshot::read_file(file, max_bytes, Links::kRefuse, &task, &interner)) {
        if (!statuses.count(node.node_name)) {
          statuses[node.node_name] = {node.node_name, std::nullopt, model::NodeState::kOk, "", 0};
          bundle.nodes.push_back(statuses[node.node_name]);
        }
        bundle.snapshots.push_back(std::move(node));
      }
    } catch (const Error& e) {
      bundle.nodes.push_back({file, std::nullopt, model::NodeState::kError, e.what(), 0});
    }
  }
  settle_serving_roles(bundle);
  return bundle;
}

}  // namespace hangscope::sources
