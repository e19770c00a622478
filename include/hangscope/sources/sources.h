// Every way a bundle is made, in one place: snapshot files, agents, this node sampled in-process,
// a bundle directory written earlier, flight-recorder dumps and core files (post-mortem). Each
// source returns a model::Bundle that diagnosis::diagnose reads the same way; an input that
// fails becomes a node in error naming it, and the others still make the bundle.
//
//   source               function              what each node of the bundle is
//   snapshot files       from_snapshot_files   a node name inside a file (one file may hold many)
//   agents               from_agents           the agent that answered, sampled at one moment
//   this node            from_local_node       this machine, sampled by capture::capture_series
//   a bundle directory   from_bundle_dir       a node of nodes.json, its snapshots/ files
//   flight records       from_flight_records   a dump file holding one rank (flight_records.h)
//   core files           from_cores            a core file holding one process
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "hangscope/agent/agent.h"
#include "hangscope/capture/node_capture.h"
#include "hangscope/capture/process_selection.h"
#include "hangscope/common/files.h"
#include "hangscope/common/progress_meter.h"
#include "hangscope/model/bundle.h"

namespace hangscope::sources {

// What a source tells its user while it works: the CLI prints it on stderr, tests collect it.
class Feedback {
 public:
  virtual ~Feedback() = default;
  // A line of progress ("read 2 snapshot(s) from F"); quiet outputs drop it.
  virtual void say(const std::string& line) const = 0;
  // An input that failed (a bad file, a core that is none); it is also a node in error.
  virtual void error(const std::string& message) const = 0;
  // Something left out or changed that the user must know (an agent's note).
  virtual void warning(const std::string& message) const = 0;
  // A phase, shown once it lasts over a second (ProgressMeter::start).
  virtual ProgressMeter::Task start(std::string what, std::string name = "",
                                    std::uint64_t total = 0) const = 0;
  // The meter phases are shown on (a bundle directory's file reads are phases of it).
  virtual ProgressMeter* meter() const = 0;
};

// Snapshot files (JSON or binary), parsed in parallel and taken in the order given: a node per
// node name in a file; the same name in two files is two nodes, named apart.
model::Bundle from_snapshot_files(const std::vector<std::string>& files,
                                  std::size_t max_input_bytes, const Feedback& feedback);

// The agents at `addresses`, asked concurrently (request.start: the moment of sample 0 in the
// coordinator's clock; each agent's answer is a node, named by it or by its address).
model::Bundle from_agents(const std::vector<std::string>& addresses,
                          const agent::CollectRequest& request, const Feedback& feedback);

// How this node is sampled in-process (diagnose without agents, collect --once).
struct LocalSampling {
  int samples = 3;
  std::chrono::milliseconds interval{1000};
  bool locals = true;
  capture::ProcessSelection selection;  // --pid, --select, --node-name
  capture::ExtraEvidence evidence;      // --log, --trigger-fr-dump, --query-store
};

// This node's samples as capture::capture_series takes them (the one sampling loop, which the
// agent runs too), each made as an agent would transmit it (every string valid UTF-8).
std::vector<model::NodeSnapshot> sample_local_node(const LocalSampling& sampling,
                                                   const Feedback& feedback);
model::Bundle from_local_node(const LocalSampling& sampling, const Feedback& feedback);

// A bundle directory diagnose wrote (report/bundle_files.h): nodes.json and every snapshots/
// file, each at most max_input_bytes, none followed through a link. A bad snapshot file is a
// node in error; a missing directory, or one that is no bundle, throws hangscope::Error.
model::Bundle from_bundle_dir(const std::string& dir,
                              std::size_t max_input_bytes = kDefaultMaxInputBytes,
                              ProgressMeter* meter = nullptr);

// Post-mortem: the ranks' flight-recorder dumps (each pattern a directory, meaning its regular
// files, or a glob), every entry kept, and the dead job's logs (`log_globs`) given to the ranks
// they belong to (flight_records.h).
model::Bundle from_flight_records(const std::vector<std::string>& patterns,
                                  const std::vector<std::string>& log_globs,
                                  std::size_t max_input_bytes, const Feedback& feedback);

// Post-mortem: core files of the job's ranks, each a node of one process read like a live rank.
struct CoreSource {
  std::vector<std::string> patterns;  // directories or globs
  std::string executable;             // --exe
  std::string sysroot;                // --sysroot
  bool locals = true;
  std::vector<std::string> log_globs;
};
model::Bundle from_cores(const CoreSource& cores, const Feedback& feedback);

// The regular files one pattern names: every regular file of a directory, else the matches of a
// glob (a plain path matches itself); a pattern that matches nothing is one entry whose error
// says so.
struct FoundFile {
  std::string path;
  std::string error;
};
std::vector<FoundFile> files_of(const std::string& pattern);

}  // namespace hangscope::sources
