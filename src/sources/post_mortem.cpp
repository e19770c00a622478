// The post-mortem sources, for a job that is gone: its flight-recorder dumps or its core files,
// and its logs.
#include <glob.h>
#include <sys/stat.h>

#include "hangscope/capture/core_capture.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/text.h"
#include "hangscope/elf/module_cache.h"
#include "hangscope/snapshot/codec.h"
#include "hangscope/sources/flight_records.h"
#include "hangscope/sources/sources.h"
#include "node_answers.h"

namespace hangscope::sources {
namespace {

// The last `max_bytes` of a log file, or why not (a FIFO or device is refused, never opened).
DumpFile read_log_tail(const std::string& path, std::size_t max_bytes) {
  DumpFile out{path, "", 0, ""};
  auto read = read_file_tail(path, "log", max_bytes);
  if (!read.text) {
    out.error = read.reason;
    return out;
  }
  out.bytes = std::move(*read.text);
  return out;
}

// The dead job's logs (--log GLOB), matched to the ranks for the signature rules. One log at a
// time (the last 4 MiB of it, which reading costs up to ~20 times until its lines are picked), so
// a glob of thousands of files never holds more than one; the lines kept across logs are bounded
// too: past 256 MiB, further logs are refused by name. A log that cannot be held is refused alone.
void attach_job_logs(const std::vector<std::string>& log_globs, model::Bundle& bundle,
                     const Feedback& feedback) {
  constexpr std::size_t kLogTail = std::size_t{4} << 20;
  constexpr std::size_t kLogsKept = std::size_t{256} << 20;
  std::size_t kept = 0;
  for (const auto& pattern : log_globs) {
    for (const auto& found : files_of(pattern)) {
      if (kept >= kLogsKept) {
        feedback.error("log " + printable(found.path) +
                       ": refused: the logs read before it keep 256 MiB of lines already");
        continue;
      }
      try {
        auto task = feedback.start("reading log", found.path);
        const auto log = found.error.empty() ? read_log_tail(found.path, kLogTail)
                                             : DumpFile{found.path, "", 0, found.error};
        for (const auto& note : attach_logs(bundle, {log}, &kept)) {
          feedback.say("log " + note);
        }
      } catch (const std::bad_alloc&) {
        feedback.error("log " + printable(found.path) +
                       ": refused: out of memory while reading it");
      }
    }
  }
}

// Reads a dump file (its bytes and write time), or names why not.
void read_dump(DumpFile& file, std::size_t max_bytes) {
  try {
    file.bytes = read_input_file(file.path, "flight-recorder dump", max_bytes);
    struct stat st {};
    if (::stat(file.path.c_str(), &st) == 0) {
      file.written_unix_ns =
          static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    }
  } catch (const Error& e) {
    file.error = e.what();
  }
}

}  // namespace

std::vector<FoundFile> files_of(const std::string& pattern) {
  std::vector<std::string> paths;
  struct stat st {};
  if (::stat(pattern.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    for (const auto& name : list_directory(pattern).value_or(std::vector<std::string>{})) {
      const std::string path = pattern + (pattern.back() == '/' ? "" : "/") + name;
      if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) paths.push_back(path);
    }
  } else {
    glob_t found{};
    if (::glob(pattern.c_str(), 0, nullptr, &found) == 0) {
      for (std::size_t i = 0; i < found.gl_pathc; ++i) paths.emplace_back(found.gl_pathv[i]);
    }
    ::globfree(&found);
  }
  if (paths.empty())
    return {{pattern, "no file matches (neither a directory nor a glob with matches)"}};
  std::vector<FoundFile> out;
  for (const auto& path : paths) out.push_back({path, ""});
  return out;
}

model::Bundle from_flight_records(const std::vector<std::string>& patterns,
                                  const std::vector<std::string>& log_globs,
                                  std::size_t max_input_bytes, const Feedback& feedback) {
  std::vector<DumpFile> files;
  for (const auto& pattern : patterns) {
    for (auto& f : files_of(pattern)) files.push_back({f.path, "", 0, f.error});
  }
  const std::size_t found = files.size();
  // Each dump is read by the worker that parses it, and freed once parsed (not all at once).
  const std::size_t max_bytes = max_input_bytes;
  auto reading = feedback.start("reading flight-recorder dumps", "", found);
  auto bundle = postmortem_bundle(std::move(files), [&](DumpFile& f) {
    read_dump(f, max_bytes);
    reading.add_done(1);  // thread-safe: the meter's lock
  });
  reading.end();
  attach_job_logs(log_globs, bundle, feedback);
  std::size_t read = 0;
  for (const auto& node : bundle.nodes) {
    if (node.status == model::NodeState::kOk) {
      ++read;
    } else {  // an error even with --quiet; the other dumps still make the report
      // read_input_file's reasons name the file already.
      const bool named = node.error.find(node.name) != std::string::npos;
      feedback.error(named ? node.error : node.name + ": " + node.error);
    }
  }
  feedback.say("read " + std::to_string(read) + " flight-recorder dump(s) of " +
               std::to_string(found) + " file(s)");
  return bundle;
}

model::Bundle from_cores(const CoreSource& cores, const Feedback& feedback) {
  model::Bundle bundle;
  capture::CoreOptions options;
  options.executable = cores.executable;
  options.sysroot = cores.sysroot;
  options.locals = cores.locals;
  options.tasks = true;                                    // as agents capture them
  options.modules = std::make_shared<elf::ModuleCache>();  // one libpython parse for all cores
  std::size_t read = 0;
  for (const auto& pattern : cores.patterns) {
    for (const auto& file : files_of(pattern)) {
      if (!file.error.empty()) {
        feedback.error(file.path + ": " + file.error);
        bundle.nodes.push_back({file.path, std::nullopt, model::NodeState::kError, file.error, 0});
        continue;
      }
      model::NodeSnapshot node;
      node.node_name = file.path;
      struct stat st {};
      if (::stat(file.path.c_str(), &st) == 0) {
        node.capture_unix_ns =
            static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
      }
      auto task = feedback.start("reading core file", file.path);
      model::ProcessRecord record = capture::core_record(file.path, options);
      task.end();
      if (!record.error.empty()) {
        feedback.error(record.error);
        bundle.nodes.push_back(
            {file.path, std::nullopt, model::NodeState::kError, record.error, 0});
        continue;
      }
      node.hostname = record.environment.count("HOSTNAME") ? record.environment["HOSTNAME"] : "";
      node.processes.push_back(std::move(record));
      bundle.snapshots.push_back(snapshot::as_transmitted(std::move(node)));
      bundle.nodes.push_back({file.path, std::nullopt, model::NodeState::kOk, "", 0});
      ++read;
    }
  }
  attach_job_logs(cores.log_globs, bundle, feedback);
  settle_serving_roles(bundle);
  feedback.say("read " + std::to_string(read) + " core file(s)");
  return bundle;
}

}  // namespace hangscope::sources
