// The post-mortem source: flight-recorder dump files made into a bundle of one node per dump,
// each holding the rank process the dump describes (no stacks, no /proc facts).
#include "hangscope/sources/flight_records.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <functional>
#include <limits>
#include <map>
#include <new>
#include <thread>

#include "hangscope/collectives/flight_recorder.h"
#include "hangscope/common/error.h"
#include "hangscope/common/text.h"
#include "hangscope/identity/logs.h"
#include "hangscope/identity/rank_identity.h"
#include "hangscope/snapshot/codec.h"

namespace hangscope::sources {
namespace {

using model::FlightRecord;

struct Parsed {
  const DumpFile* file = nullptr;
  FlightRecord record;
};

// The dump parsed with every entry kept, and its rank; throws hangscope::Error naming why not.
Parsed parse_dump(const DumpFile& file) {
  if (!file.error.empty()) throw Error(file.error);
  Parsed out;
  out.file = &file;
  out.record =
      collectives::parse_flight_record(file.bytes, std::numeric_limits<std::size_t>::max());
  if (!out.record.rank) out.record.rank = model::rank_from_file_name(file.path);
  if (!out.record.rank) {
    throw Error("no rank: the dump has no `rank` key and its file name does not end with one");
  }
  out.record.path = file.path;
  out.record.written_unix_ns = file.written_unix_ns;
  return out;
}

// The world size the dumps' process groups show: the highest rank of any group, plus one.
std::optional<int> world_size_of(const FlightRecord& record) {
  std::optional<int> out;
  for (const auto& [id, g] : record.groups) {
    for (int r : g.ranks) {
      if (r >= 0 && r < std::numeric_limits<int>::max()) out = std::max(out.value_or(0), r + 1);
    }
  }
  if (record.rank) out = std::max(out.value_or(0), *record.rank + 1);
  return out;
}

std::int64_t median_written(const std::vector<Parsed>& dumps) {
  std::vector<std::int64_t> times;
  for (const auto& d : dumps) times.push_back(d.record.written_unix_ns);
  std::sort(times.begin(), times.end());
  return times.empty() ? 0 : times[times.size() / 2];
}

std::string base_name(const std::string& path) {
  return path.substr(path.find_last_of('/') + 1);
}

model::NodeSnapshot node_of(Parsed dump, std::optional<int> world_size, bool full_path) {
  model::NodeSnapshot node;
  node.node_name = printable(full_path ? dump.file->path : base_name(dump.file->path));
  node.capture_unix_ns = dump.record.written_unix_ns;
  model::ProcessRecord p;
  p.comm = "(flight-recorder dump)";
  p.identity.role = model::ProcessRole::kRank;
  p.identity.rank = dump.record.rank;
  p.identity.world_size = world_size;
  p.identity.source = model::IdentitySource::kFlightRecorder;
  p.identity.sources["rank"] = model::to_string(model::IdentitySource::kFlightRecorder);
  p.flight_record = std::move(dump.record);
  node.processes.push_back(std::move(p));
  return node;
}

// The dumps by rank, the newest of each rank first.
std::map<int, std::vector<Parsed*>> by_rank_newest_first(std::vector<Parsed>& dumps) {
  std::map<int, std::vector<Parsed*>> by_rank;
  for (auto& d : dumps) by_rank[*d.record.rank].push_back(&d);
  for (auto& [rank, list] : by_rank) {
    std::stable_sort(list.begin(), list.end(), [](const Parsed* a, const Parsed* b) {
      return a->record.written_unix_ns > b->record.written_unix_ns;
    });
  }
  return by_rank;
}

// Nodes are named by the dumps' file names, by their paths when two file names are alike.
bool names_need_paths(const std::map<int, std::vector<Parsed*>>& by_rank) {
  std::map<std::string, int> names;
  for (const auto& [rank, list] : by_rank) ++names[base_name(list.front()->file->path)];
  return std::any_of(names.begin(), names.end(), [](const auto& n) { return n.second > 1; });
}

// Of several dumps of one rank, the newest; the others are named in its notes.
std::vector<model::NodeSnapshot> newest_per_rank(std::vector<Parsed>& dumps) {
  auto by_rank = by_rank_newest_first(dumps);
  std::optional<int> world;
  for (const auto& d : dumps) {
    if (const auto w = world_size_of(d.record)) world = std::max(world.value_or(0), *w);
  }
  const bool full_paths = names_need_paths(by_rank);
  std::vector<model::NodeSnapshot> out;
  for (auto& [rank, list] : by_rank) {
    std::vector<std::string> notes;
    for (std::size_t i = 1; i < list.size(); ++i) {
      notes.push_back("rank " + std::to_string(rank) + " also has the older dump " +
                      printable(list[i]->file->path) + ": not used (the newest, " +
                      printable(list.front()->file->path) + ", is)");
    }
    out.push_back(node_of(std::move(*list.front()), world, full_paths));
    out.back().notes = std::move(notes);
  }
  return out;
}

// "[rank12]: text" → 12; nullopt for any other line.
std::optional<int> rank_prefix(std::string_view line) {
  constexpr std::string_view kPrefix = "[rank";
  if (line.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::size_t i = kPrefix.size();
  int rank = 0;
  for (; i < line.size() && i < kPrefix.size() + 9 &&
         std::isdigit(static_cast<unsigned char>(line[i]));
       ++i) {
    rank = rank * 10 + (line[i] - '0');
  }
  if (i == kPrefix.size() || line.substr(i, 2) != "]:") return std::nullopt;
  return rank;
}

// vLLM's process prefix of a line: "(Worker_TP1 pid=123) …" → "Worker_TP1 pid=123"; "" for none.
std::string_view process_prefix(std::string_view line) {
  if (line.empty() || line.front() != '(') return {};
  const auto close = line.find(')');
  if (close == std::string_view::npos || close > 200) return {};
  return line.substr(1, close - 1);
}

// The rank a prefix names by itself: "Worker_TP3" (no PP, no DP part: the tensor-parallel rank is
// the global one) → 3; nullopt for any other prefix (PP and DP need sizes the log may not give).
std::optional<int> rank_of_worker_name(std::string_view prefix) {
  constexpr std::string_view kWorker = "Worker_TP";
  if (prefix.substr(0, kWorker.size()) != kWorker) return std::nullopt;
  std::string_view digits = prefix.substr(kWorker.size());
  digits = digits.substr(0, digits.find(' '));
  if (digits.empty() || digits.size() > 6 || !std::all_of(digits.begin(), digits.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      })) {
    return std::nullopt;
  }
  return std::stoi(std::string(digits));
}

std::vector<std::string_view> lines_of(const std::string& text) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    out.emplace_back(text.data() + pos, end - pos);
    pos = end + 1;
  }
  return out;
}

// The rank of each vLLM process prefix of a combined log: what the prefix's own lines say
// (vLLM's "world_size=16 rank=4 …" and "rank 4 in world size 16 is assigned as …" lines, read
// as the live path reads a process's log), else what a "Worker_TPn" name says alone.
std::map<std::string_view, int> ranks_of_prefixes(const std::vector<std::string_view>& lines) {
  std::map<std::string_view, std::vector<std::string>> by_prefix;
  for (const auto line : lines) {
    if (const auto prefix = process_prefix(line); !prefix.empty()) {
      by_prefix[prefix].emplace_back(line);
    }
  }
  std::map<std::string_view, int> out;
  for (const auto& [prefix, own] : by_prefix) {
    model::RankIdentity id;
    identity::identify_from_log(own, id);
    if (!id.rank) id.rank = rank_of_worker_name(prefix);
    if (id.rank) out[prefix] = *id.rank;
  }
  return out;
}

// A log's text split by rank: lines with torchrun's "[rankN]:" prefix to rank N, lines of a vLLM
// process prefix whose rank is known to that rank, the others to `file_rank`.
std::map<int, std::string> split_by_rank(const std::string& text, std::optional<int> file_rank) {
  const auto lines = lines_of(text);
  const auto prefixes = ranks_of_prefixes(lines);
  std::map<int, std::string> out;
  for (const auto line : lines) {
    auto rank = rank_prefix(line);
    if (!rank) {
      const auto it = prefixes.find(process_prefix(line));
      if (it != prefixes.end()) rank = it->second;
    }
    if (!rank) rank = file_rank;
    if (rank) out[*rank].append(line).push_back('\n');
  }
  return out;
}

// Runs work(0..n-1) on up to one thread per core; `work` must not throw.
void in_parallel(std::size_t n, const std::function<void(std::size_t)>& work) {
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t i = next++; i < n; i = next++) work(i);
  };
  std::vector<std::thread> threads;
  const std::size_t parallel =
      std::min<std::size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  for (std::size_t t = 1; t < parallel; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
}

}  // namespace

std::vector<std::string> attach_logs(model::Bundle& bundle, const std::vector<DumpFile>& logs,
                                     std::size_t* kept_bytes) {
  std::map<int, model::ProcessRecord*> by_rank;
  for (auto& node : bundle.snapshots) {
    for (auto& p : node.processes) {
      if (p.identity.rank) by_rank.emplace(*p.identity.rank, &p);
    }
  }
  std::vector<std::string> notes;
  for (const auto& log : logs) {
    if (!log.error.empty()) {
      notes.push_back(printable(log.path) + ": " + printable(log.error));
      continue;
    }
    bool used = false;
    for (const auto& [rank, text] :
         split_by_rank(log.bytes, model::rank_from_file_name(log.path))) {
      const auto it = by_rank.find(rank);
      if (it == by_rank.end()) continue;
      it->second->logs.push_back(
          {valid_utf8(log.path), identity::interesting_lines(valid_utf8(text))});
      if (kept_bytes != nullptr) {
        for (const auto& line : it->second->logs.back().lines) *kept_bytes += line.size();
      }
      used = true;
    }
    if (!used) {
      notes.push_back(printable(log.path) +
                      ": no line belongs to a rank of the dumps (neither a \"[rankN]:\" prefix "
                      "nor a rank number at the end of the file name)");
    }
  }
  return notes;
}

model::Bundle postmortem_bundle(std::vector<DumpFile> files,
                                const std::function<void(DumpFile&)>& read) {
  model::Bundle bundle;
  // Read (with `read`) and parsed in parallel (a job's dumps are many and each is independent),
  // taken in order; the bytes are freed once parsed, the record is what is kept.
  std::vector<std::optional<Parsed>> parsed(files.size());
  std::vector<std::string> errors(files.size());
  in_parallel(files.size(), [&](std::size_t i) {
    try {
      if (read && files[i].error.empty()) read(files[i]);
      parsed[i] = parse_dump(files[i]);
    } catch (const std::bad_alloc&) {  // reading it: parse_flight_record names its own
      errors[i] = "refused: out of memory while reading it";
    } catch (const std::exception& e) {  // nothing may escape a thread
      errors[i] = e.what();
    }
    std::string().swap(files[i].bytes);
  });
  std::vector<Parsed> dumps;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (parsed[i]) {
      dumps.push_back(std::move(*parsed[i]));
    } else {
      bundle.nodes.push_back({printable(files[i].path), std::nullopt, model::NodeState::kError,
                              printable(errors[i]), 0});
    }
  }
  const std::int64_t median = median_written(dumps);
  const std::int64_t limit =
      std::chrono::duration_cast<std::chrono::nanoseconds>(model::kStaleBeforeMedian).count();
  for (auto& d : dumps) d.record.fresh = median - d.record.written_unix_ns <= limit;
  auto nodes = newest_per_rank(dumps);
  // As snapshots arrive from files: every string from the dumps made valid UTF-8.
  std::vector<std::string> failed(nodes.size());
  in_parallel(nodes.size(), [&](std::size_t i) {
    try {
      nodes[i] = snapshot::as_transmitted(nodes[i]);
    } catch (const std::exception& e) {  // nothing may escape a thread
      failed[i] = e.what();
    }
  });
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!failed[i].empty()) {
      bundle.nodes.push_back(
          {nodes[i].node_name, std::nullopt, model::NodeState::kError, printable(failed[i]), 0});
      continue;
    }
    bundle.nodes.push_back({nodes[i].node_name, std::nullopt, model::NodeState::kOk, "", 0});
    bundle.snapshots.push_back(std::move(nodes[i]));
  }
  return bundle;
}

}  // namespace hangscope::sources
