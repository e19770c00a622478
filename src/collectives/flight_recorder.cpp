#include "hangscope/collectives/flight_recorder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <limits>
#include <new>
#include <set>
#include <stdexcept>
#include <thread>

#include "hangscope/collectives/torch_pickle.h"
#include "hangscope/common/bounded_json.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"

namespace hangscope::collectives {

using model::FlightRecord;
namespace {

using nlohmann::json;

constexpr std::size_t kMaxDumpBytes = 64u << 20;

// The budget of a dump (docs/security.md, "Amplification"): what is kept of a JSON dump, and
// what a pickle may decode to and expand to (torch_pickle.h). A real entry keeps 15 to 40
// values (more with many tensors); 2,097,152 values are about 50 MiB of JSON.
constexpr JsonLimits kDumpJson{64, 1u << 21, 256u << 20};
constexpr PickleLimits kDumpPickle{256u << 20, 1u << 21, 256u << 20, 64};
// pg_config's ranks, a list of numbers written as a string.
constexpr JsonLimits kRanksJson{4, 1u << 20, 1u << 20};

// The members of a dump this reader uses; the others (each entry's frames and durations, NCCL's
// communicator state, …) are dropped before they are built, in both formats.
bool used_member(const std::vector<std::string>& path) {
  static const std::set<std::string, std::less<>> kTop = {"version", "rank", "pg_config",
                                                          "pg_status", "entries"};
  static const std::set<std::string, std::less<>> kEntry = {
      "process_group",  "pg_id",  "collective_seq_id", "p2p_seq_id",
      "profiling_name", "is_p2p", "input_sizes",       "input_dtypes",
      "output_sizes",   "state",  "time_created_ns"};
  if (path.size() == 1) return kTop.count(path[0]) != 0;
  if (path.size() == 3 && path[0] == "entries" && path[1] == "*") return kEntry.count(path[2]) != 0;
  return true;
}

// Flight recorder writes counters as numbers, some versions (and the JSON variant) as strings.
std::optional<std::int64_t> integer(const json& j) {
  if (j.is_number_integer()) return j.get<std::int64_t>();
  if (j.is_string()) {
    try {
      std::size_t used = 0;
      const auto v = std::stoll(j.get<std::string>(), &used);
      if (used == j.get<std::string>().size()) return v;
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

std::string text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "";
  return j.dump();
}

// "[0, 1, 2]" (pg_config writes the ranks as a string) or [0, 1, 2].
std::vector<int> ranks_of(const json& j) {
  json list = j;
  if (j.is_string()) {
    try {
      list = parse_json_within(j.get<std::string>(), kRanksJson);
    } catch (const std::exception&) {  // not JSON, or past the limits: no ranks
      return {};
    }
  }
  std::vector<int> out;
  if (!list.is_array()) return out;
  for (const auto& r : list) {
    if (auto v = integer(r)) out.push_back(static_cast<int>(*v));
  }
  return out;
}

model::FlightEntry entry_from(const json& e, std::size_t index) {
  const auto where = "entry " + std::to_string(index);
  if (!e.is_object()) throw Error(where + ": not a dict");
  model::FlightEntry out;
  if (e.contains("process_group") && e["process_group"].is_array() && !e["process_group"].empty()) {
    out.pg = text(e["process_group"][0]);
  } else if (e.contains("pg_id")) {
    out.pg = text(e["pg_id"]);
  } else {
    throw Error(where + ": no process_group or pg_id");
  }
  const auto seq = e.contains("collective_seq_id") ? integer(e["collective_seq_id"]) : std::nullopt;
  if (!seq) throw Error(where + ": `collective_seq_id` is missing or not an integer");
  out.collective_seq_id = *seq;
  if (e.contains("p2p_seq_id")) out.p2p_seq_id = integer(e["p2p_seq_id"]).value_or(0);
  out.profiling_name = text(e.value("profiling_name", json()));
  // Dumps without `is_p2p` (older torch) say it in the name: "nccl:send 0->1", "nccl:recv 1<-0".
  out.is_p2p = e.contains("is_p2p") ? e.value("is_p2p", false)
                                    : out.profiling_name.find(":send ") != std::string::npos ||
                                          out.profiling_name.find(":recv ") != std::string::npos;
  out.input_sizes = e.contains("input_sizes") ? e["input_sizes"].dump() : "";
  out.input_dtypes = e.contains("input_dtypes") ? e["input_dtypes"].dump() : "";
  out.output_sizes = e.contains("output_sizes") ? e["output_sizes"].dump() : "";
  out.state = model::parse_flight_state(text(e.value("state", json())));
  if (e.contains("time_created_ns"))
    out.time_created_ns = integer(e["time_created_ns"]).value_or(0);
  return out;
}

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

std::string get(const std::map<std::string, std::string>& env, const char* key) {
  const auto it = env.find(key);
  return it == env.end() ? std::string() : it->second;
}

FlightRecord parse_document(const std::string& bytes, std::size_t max_entries_per_group);

}  // namespace

FlightRecord parse_flight_record(const std::string& bytes, std::size_t max_entries_per_group) {
  try {
    return parse_document(bytes, max_entries_per_group);
  } catch (const json::exception& e) {
    throw Error(std::string("malformed flight-recorder dump: ") + e.what());
  } catch (const std::bad_alloc&) {
    // The budgets keep a dump far below this; the last guard of the per-dump boundary.
    throw Error("refused: out of memory while reading a dump of " + std::to_string(bytes.size()) +
                " bytes");
  } catch (const std::length_error& e) {
    throw Error(std::string("refused: a size beyond what can be held (") + e.what() + ")");
  }
}

namespace {

FlightRecord parse_document(const std::string& bytes, std::size_t max_entries_per_group) {
  FlightRecord record;
  json doc;
  if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80) {
    record.format = "pickle";
    const Pickle pickle = decode_torch_pickle(bytes, kDumpPickle);
    doc = PickleExpander(pickle, kDumpPickle).to_json(pickle.root(), used_member);
  } else {
    record.format = "json";
    try {
      doc = parse_json_within(bytes, kDumpJson, used_member);
    } catch (const json::parse_error& e) {
      throw Error(std::string("not a flight-recorder dump (neither pickle nor JSON): ") + e.what());
    } catch (const Error& e) {
      throw Error(std::string("JSON dump refused: ") + e.what());
    }
  }
  if (!doc.is_object() || !doc.contains("entries") || !doc["entries"].is_array()) {
    throw Error("not a flight-recorder dump: no `entries` list");
  }
  record.version = text(doc.value("version", json()));
  if (doc.contains("rank")) {
    const auto rank = integer(doc["rank"]);
    if (rank && *rank >= 0 && *rank <= std::numeric_limits<int>::max()) {
      record.rank = static_cast<int>(*rank);
    }
  }
  if (doc.contains("pg_config") && doc["pg_config"].is_object()) {
    for (const auto& [id, config] : doc["pg_config"].items()) {
      model::FlightGroup g;
      g.id = id;
      if (config.is_object()) {
        g.name = text(config.value("name", json(id)));
        g.desc = text(config.value("desc", json()));
        if (config.contains("ranks")) g.ranks = ranks_of(config["ranks"]);
      }
      record.groups[id] = g;
    }
  }
  if (doc.contains("pg_status") && doc["pg_status"].is_object()) {
    for (const auto& [id, status] : doc["pg_status"].items()) {
      if (!status.is_object()) continue;
      auto& g = record.groups[id];
      g.id = id;
      if (status.contains("last_enqueued_collective"))
        g.last_enqueued = integer(status["last_enqueued_collective"]);
      if (status.contains("last_started_collective"))
        g.last_started = integer(status["last_started_collective"]);
      if (status.contains("last_completed_collective"))
        g.last_completed = integer(status["last_completed_collective"]);
    }
  }
  std::map<std::string, std::vector<model::FlightEntry>> per_group;
  std::size_t index = 0;
  for (const auto& e : doc["entries"]) {
    auto entry = entry_from(e, index++);
    per_group[entry.pg].push_back(std::move(entry));
  }
  for (auto& [pg, entries] : per_group) {
    if (!record.groups.count(pg)) record.groups[pg].id = pg;  // a group without pg_config
    const std::size_t skip =
        entries.size() > max_entries_per_group ? entries.size() - max_entries_per_group : 0;
    record.entries.insert(record.entries.end(), entries.begin() + static_cast<long>(skip),
                          entries.end());
  }
  return record;
}

}  // namespace

std::vector<std::string> dump_prefixes(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  for (const char* key : {"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}) {
    if (!get(env, key).empty()) out.push_back(get(env, key));
  }
  if (!get(env, "HOME").empty())
    out.push_back(get(env, "HOME") + "/.cache/torch/comm_lib_trace_rank_");
  out.push_back("/tmp/nccl_trace_rank_");
  return out;
}

std::optional<FlightRecord> read_flight_record(const std::string& root,
                                               const std::map<std::string, std::string>& env,
                                               int rank, uid_t rank_uid,
                                               std::int64_t capture_unix_ns,
                                               std::chrono::seconds stale_after) {
  // Opened first, then judged by the descriptor (no stat-then-open race): a regular file of the
  // rank's user or root, no link (a job's user could point root at any file), no FIFO.
  const OpenRules rules{Links::kRefuse, rank_uid};
  std::string newest;
  std::int64_t newest_ns = -1;
  OpenedFile newest_file;
  std::string refused_path, refusal;
  for (const auto& prefix : dump_prefixes(env)) {
    if (prefix.empty() || prefix.front() != '/') continue;
    const std::string path = prefix + std::to_string(rank);
    OpenedFile file = open_regular_file(root + path, "flight-recorder dump", rules);
    if (!file.ok()) {
      if (file.error != ENOENT && file.error != ENOTDIR && refusal.empty()) {
        refused_path = path;
        refusal = file.reason;
      }
      continue;
    }
    if (mtime_ns(file.st) > newest_ns) {
      newest_ns = mtime_ns(file.st);
      newest = path;
      newest_file = std::move(file);
    }
  }
  if (newest.empty()) {
    if (refusal.empty()) return std::nullopt;
    FlightRecord record;
    record.path = refused_path;
    record.rank = rank;
    record.error = "refused (" + refusal + ")";
    return record;
  }
  FlightRecord record;
  try {
    const auto read = read_opened_file(newest_file, kMaxDumpBytes);
    if (!read.text) {
      record.error = errno_message("cannot read " + newest, read.error);
    } else {
      record = parse_flight_record(*read.text);
    }
  } catch (const std::exception& e) {  // the agent lives on: this dump is refused, not the rank
    record = FlightRecord();
    record.error = newest + ": " + e.what();
  }
  record.path = newest;
  record.rank = rank;
  record.written_unix_ns = newest_ns;
  record.fresh = capture_unix_ns - newest_ns <=
                 std::chrono::duration_cast<std::chrono::nanoseconds>(stale_after).count();
  return record;
}

std::string request_flight_dump(const std::string& root,
                                const std::map<std::string, std::string>& env, int rank,
                                uid_t rank_uid) {
  const std::string stem = get(env, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE");
  if (stem.empty()) return "TORCH_NCCL_DEBUG_INFO_PIPE_FILE is not set: the rank has no dump fifo";
  const std::string pipe = stem + std::to_string(rank) + ".pipe";
  // Opened first with O_NOFOLLOW and O_NONBLOCK, then judged by its descriptor: root writes
  // only into a FIFO of the rank's user (or root), never through a link a job's user swapped in.
  const OpenedFile fifo = open_fifo_for_writing(root + pipe, "fifo", {Links::kRefuse, rank_uid});
  if (!fifo.ok()) {
    if (fifo.error == ENOENT) return errno_message("no fifo " + pipe, ENOENT);
    if (fifo.error == ENXIO) {
      return pipe + ": nobody reads it (the rank's dump thread is not running)";
    }
    if (fifo.error == EPERM) return "fifo " + pipe + " refused: it " + fifo.reason;
    return errno_message("cannot open " + pipe, fifo.error);
  }
  ssize_t n = -1;
  do {
    n = ::write(fifo.fd.get(), "1\n", 2);
  } while (n < 0 && errno == EINTR);
  return n > 0 ? "" : errno_message("cannot write to " + pipe, errno);
}

bool flight_dump_written_since(const std::string& root,
                               const std::map<std::string, std::string>& env, int rank,
                               std::int64_t since_unix_ns) {
  for (const auto& prefix : dump_prefixes(env)) {
    struct stat dump {};
    if (prefix.front() == '/' &&
        ::lstat((root + prefix + std::to_string(rank)).c_str(), &dump) == 0 &&
        S_ISREG(dump.st_mode) && mtime_ns(dump) >= since_unix_ns) {
      return true;
    }
  }
  return false;
}

std::string trigger_flight_dump(const std::string& root,
                                const std::map<std::string, std::string>& env, int rank,
                                uid_t rank_uid, std::chrono::milliseconds timeout) {
  // File times have the file system's granularity: compare from a little before the request.
  const auto since = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count() -
                     10'000'000;
  if (auto error = request_flight_dump(root, env, rank, rank_uid); !error.empty()) return error;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (flight_dump_written_since(root, env, rank, since)) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "no new dump within " + std::to_string(timeout.count()) + " ms after the request";
}

}  // namespace hangscope::collectives
