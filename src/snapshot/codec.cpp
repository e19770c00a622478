#include "hangscope/snapshot/codec.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>
#include <google/protobuf/wire_format_lite.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "flight_codec.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/progress_meter.h"
#include "hangscope/common/text.h"
#include "hangscope/v1/snapshot.pb.h"
#include "hangscope/version.h"

namespace hangscope::snapshot {
namespace {

// Assigns each distinct string one index; index 0 is "".
class StringTable {
 public:
  explicit StringTable(v1::NodeSnapshot& out) : out_(out) {
    out_.add_strings("");
    index_[""] = 0;
  }
  std::uint32_t intern(const std::string& text) {
    const auto [it, added] = index_.emplace(text, static_cast<std::uint32_t>(index_.size()));
    if (added) out_.add_strings(valid_utf8(text));
    return it->second;
  }

 private:
  v1::NodeSnapshot& out_;
  std::unordered_map<std::string, std::uint32_t> index_;
};

void encode_frame(const model::Frame& f, v1::InternedFrame& out, StringTable& strings) {
  out.set_python(f.kind == model::Frame::Kind::kPython);
  out.set_function(strings.intern(f.function));
  out.set_module(strings.intern(f.module));
  if (f.module.empty()) out.set_address(f.address);
  out.set_offset(f.offset);
  out.set_module_offset(f.module_offset);
  out.set_qualname(strings.intern(f.qualname));
  out.set_file(strings.intern(f.file));
  out.set_line(f.line);
  for (const auto& [name, value] : f.locals) {
    auto* local = out.add_locals();
    local->set_name(strings.intern(name));
    local->set_value(valid_utf8(value));
  }
}

// Distinct stacks of a snapshot, each sent once (index + 1 in the threads).
class StackTable {
 public:
  StackTable(v1::NodeSnapshot& out, StringTable& strings) : out_(out), strings_(strings) {}
  std::uint32_t intern(const model::FrameList& frames) {
    // A stack the lists share (decoded, or copied) is encoded once.
    if (const auto known = by_list_.find(frames.stack().get()); known != by_list_.end()) {
      return known->second;
    }
    v1::Stack stack;
    for (const auto& f : frames) encode_frame(f, *stack.add_frames(), strings_);
    std::string key;
    stack.SerializeToString(&key);
    const auto [it, added] =
        index_.emplace(std::move(key), static_cast<std::uint32_t>(index_.size() + 1));
    if (added) *out_.add_stacks() = std::move(stack);
    by_list_.emplace(frames.stack().get(), it->second);
    lists_.push_back(frames.stack());  // held: its address names it while the table lives
    return it->second;
  }

 private:
  std::unordered_map<const model::FrameList::Stack*, std::uint32_t> by_list_;
  std::vector<std::shared_ptr<const model::FrameList::Stack>> lists_;
  v1::NodeSnapshot& out_;
  StringTable& strings_;
  std::unordered_map<std::string, std::uint32_t> index_;
};

void encode_thread(const model::ThreadDump& t, v1::ThreadSnapshot& out, StackTable& stacks) {
  out.set_tid(t.tid);
  out.set_name(valid_utf8(t.name));
  out.set_state(std::string(1, t.state));
  out.set_wchan(valid_utf8(t.wchan));
  if (t.py_thread_id) out.set_py_thread_id(*t.py_thread_id);
  if (t.py_thread_name) out.set_py_thread_name(valid_utf8(*t.py_thread_name));
  out.set_holds_gil(t.holds_gil);
  out.set_merge(valid_utf8(t.merge));
  if (!t.frames.empty() && t.frames == t.native_frames) {
    out.set_merged_from(v1::ThreadSnapshot::MERGED_NATIVE);
  } else if (!t.frames.empty() && t.frames == t.python_frames) {
    out.set_merged_from(v1::ThreadSnapshot::MERGED_PYTHON);
  } else if (!t.frames.empty()) {
    out.set_merged_stack(stacks.intern(t.frames));
  }
  if (!t.native_frames.empty()) out.set_native_stack(stacks.intern(t.native_frames));
  if (!t.python_frames.empty()) out.set_python_stack(stacks.intern(t.python_frames));
  for (const auto& n : t.notes) out.add_notes(valid_utf8(n));
  for (const auto& k : t.kernel_stack) out.add_kernel_stack(valid_utf8(k));
  out.set_paused_ns(static_cast<std::uint64_t>(t.paused.count()));
  out.set_utime_ticks(t.utime_ticks);
  out.set_stime_ticks(t.stime_ticks);
  out.set_context_switches(t.context_switches);
  if (t.probes) {
    auto& probes = *out.mutable_probes();
    probes.set_taken(t.probes->taken);
    for (const auto& [frames, n] : t.probes->kept) {
      probes.add_kept_frames(frames);
      probes.add_kept_probes(n);
    }
  }
}

// model::ProcessRole and its wire enum, in both directions.
constexpr std::pair<model::ProcessRole, v1::ProcessRole> kRoles[] = {
    {model::ProcessRole::kUnidentified, v1::PROCESS_ROLE_UNIDENTIFIED},
    {model::ProcessRole::kRank, v1::PROCESS_ROLE_RANK},
    {model::ProcessRole::kEngine, v1::PROCESS_ROLE_ENGINE},
    {model::ProcessRole::kApi, v1::PROCESS_ROLE_API},
    {model::ProcessRole::kDriver, v1::PROCESS_ROLE_DRIVER},
    {model::ProcessRole::kCoordinator, v1::PROCESS_ROLE_COORDINATOR},
    {model::ProcessRole::kLauncher, v1::PROCESS_ROLE_LAUNCHER},
    {model::ProcessRole::kHelper, v1::PROCESS_ROLE_HELPER},
};

v1::ProcessRole encode_role(model::ProcessRole role) {
  for (const auto& [model_value, wire] : kRoles) {
    if (model_value == role) return wire;
  }
  return v1::PROCESS_ROLE_UNIDENTIFIED;
}

// The enum when written (2.4), else the text older writers sent; a value of a newer minor is
// unidentified.
model::ProcessRole role_of(const v1::RankIdentity& id) {
  if (id.role_kind() == v1::PROCESS_ROLE_UNSPECIFIED) return model::parse_role(id.role());
  for (const auto& [model_value, wire] : kRoles) {
    if (wire == id.role_kind()) return model_value;
  }
  return model::ProcessRole::kUnidentified;
}

// model::IdentitySource and its wire enum, in both directions (kOther has none: UNSPECIFIED,
// so that a reader falls back to the text).
constexpr std::pair<model::IdentitySource, v1::IdentitySource> kIdentitySources[] = {
    {model::IdentitySource::kNone, v1::IDENTITY_SOURCE_NONE},
    {model::IdentitySource::kEnv, v1::IDENTITY_SOURCE_ENV},
    {model::IdentitySource::kMemoryEnv, v1::IDENTITY_SOURCE_MEMORY_ENV},
    {model::IdentitySource::kTitle, v1::IDENTITY_SOURCE_TITLE},
    {model::IdentitySource::kLog, v1::IDENTITY_SOURCE_LOG},
    {model::IdentitySource::kMemoryProcessGroup, v1::IDENTITY_SOURCE_MEMORY_PROCESS_GROUP},
    {model::IdentitySource::kMemoryInitArguments, v1::IDENTITY_SOURCE_MEMORY_INIT_ARGUMENTS},
    {model::IdentitySource::kFlightRecorder, v1::IDENTITY_SOURCE_FLIGHT_RECORDER},
};

v1::IdentitySource wire_identity_source(model::IdentitySource source) {
  for (const auto& [model_value, wire] : kIdentitySources) {
    if (model_value == source) return wire;
  }
  return v1::IDENTITY_SOURCE_UNSPECIFIED;
}

// The enum when written (2.4), else the text older writers sent.
model::IdentitySource identity_source_of(const v1::RankIdentity& id) {
  for (const auto& [model_value, wire] : kIdentitySources) {
    if (wire == id.source_kind()) return model_value;
  }
  return model::parse_identity_source(id.source());
}

void encode_identity(const model::ProcessRecord& r, v1::RankIdentity& out) {
  const auto& id = r.identity;
  out.set_role(std::string(model::to_string(id.role)));
  out.set_role_kind(encode_role(id.role));
  if (id.rank) out.set_rank(*id.rank);
  if (id.local_rank) out.set_local_rank(*id.local_rank);
  if (id.world_size) out.set_world_size(*id.world_size);
  if (id.tp) out.set_tp(*id.tp);
  if (id.pp) out.set_pp(*id.pp);
  if (id.dp) out.set_dp(*id.dp);
  out.set_source(std::string(model::to_string(id.source)));
  out.set_source_kind(wire_identity_source(id.source));
  out.set_job(valid_utf8(id.job));
  out.set_title(valid_utf8(id.title));  // from the target's command line
  out.set_helper_of(r.helper_of);
  for (const auto& [field, source] : id.sources) {
    (*out.mutable_sources())[valid_utf8(field)] = valid_utf8(source);
  }
}

}  // namespace

// The indexes of one read (Interner). Every interned value is held by a shared_ptr that the
// decoded snapshots share; the frames live in one pool that every interned stack keeps alive.
struct Interner::State {
  std::mutex mutex;
  // Text of frames' fields, canonical: a frame's key compares these pointers.
  std::unordered_set<std::string> strings;
  std::shared_ptr<std::deque<model::Frame>> frames = std::make_shared<std::deque<model::Frame>>();
  struct FrameKey {
    bool python = false;
    const std::string *function = nullptr, *module = nullptr, *qualname = nullptr, *file = nullptr;
    std::uint64_t address = 0, offset = 0, module_offset = 0;
    int line = 0;
    bool operator==(const FrameKey&) const = default;
  };
  struct FrameKeyHash {
    std::size_t operator()(const FrameKey& k) const {
      std::size_t h = k.python ? 0x9e3779b97f4a7c15u : 0;
      for (const std::size_t v :
           {reinterpret_cast<std::size_t>(k.function), reinterpret_cast<std::size_t>(k.module),
            reinterpret_cast<std::size_t>(k.qualname), reinterpret_cast<std::size_t>(k.file),
            static_cast<std::size_t>(k.address), static_cast<std::size_t>(k.offset),
            static_cast<std::size_t>(k.module_offset), static_cast<std::size_t>(k.line)}) {
        h ^= std::hash<std::size_t>{}(v) + 0x9e3779b97f4a7c15u + (h << 6) + (h >> 2);
      }
      return h;
    }
  };
  std::unordered_map<FrameKey, const model::Frame*, FrameKeyHash> frame_index;

  // Values equal in content, held once: by the hash of their content.
  template <typename T, typename Equal = std::equal_to<T>>
  struct Pool {
    std::unordered_multimap<std::size_t, std::shared_ptr<T>> by_hash;
    std::shared_ptr<T> intern(T value, std::size_t hash) {
      for (auto [it, end] = by_hash.equal_range(hash); it != end; ++it) {
        if (Equal{}(*it->second, value)) return it->second;
      }
      return by_hash.emplace(hash, std::make_shared<T>(std::move(value)))->second;
    }
  };
  // Stacks of interned frames: equal frames are one frame.
  struct SameFrames {
    bool operator()(const model::FrameList::Stack& a, const model::FrameList::Stack& b) const {
      return a.frames == b.frames;
    }
  };
  Pool<model::FrameList::Stack, SameFrames> stacks;
  Pool<std::map<std::string, std::string>> facts;
  Pool<std::vector<model::Socket>> sockets;
  Pool<std::vector<std::string>> lines;
};

Interner::Interner() : state_(std::make_unique<State>()) {}
Interner::~Interner() = default;

namespace {

template <typename T>
void mix(std::size_t& h, const T& value) {
  h ^= std::hash<T>{}(value) + 0x9e3779b97f4a7c15u + (h << 6) + (h >> 2);
}

std::shared_ptr<std::map<std::string, std::string>> intern_facts(
    Interner::State& state, std::map<std::string, std::string> facts) {
  std::size_t h = facts.size();
  for (const auto& [k, v] : facts) {
    mix(h, k);
    mix(h, v);
  }
  std::lock_guard lock(state.mutex);
  return state.facts.intern(std::move(facts), h);
}

std::shared_ptr<std::vector<std::string>> intern_lines(Interner::State& state,
                                                       std::vector<std::string> lines) {
  std::size_t h = lines.size();
  for (const auto& line : lines) mix(h, line);
  std::lock_guard lock(state.mutex);
  return state.lines.intern(std::move(lines), h);
}

std::shared_ptr<std::vector<model::Socket>> intern_sockets(Interner::State& state,
                                                           std::vector<model::Socket> sockets) {
  std::size_t h = sockets.size();
  for (const auto& s : sockets) {
    mix(h, s.inode);
    mix(h, s.fd);
    mix(h, s.local);
    mix(h, s.remote);
    mix(h, s.path);
  }
  std::lock_guard lock(state.mutex);
  return state.sockets.intern(std::move(sockets), h);
}

// Reads strings back, refusing indices outside the table; canonical() gives the interner's one
// copy of a string, for frames' keys (looked up once per index of the table).
class StringLookup {
 public:
  StringLookup(const v1::NodeSnapshot& in, Interner::State& state)
      : in_(in), state_(state), canonical_(static_cast<std::size_t>(in.strings_size()), nullptr) {}
  const std::string& operator()(std::uint32_t index) const {
    if (index >= static_cast<std::uint32_t>(in_.strings_size())) {
      throw Error("string index " + std::to_string(index) + " is outside the snapshot's table of " +
                  std::to_string(in_.strings_size()));
    }
    return in_.strings(static_cast<int>(index));
  }
  // Called with the interner's mutex held.
  const std::string* canonical(std::uint32_t index) const {
    const std::string& text = (*this)(index);
    auto& known = canonical_[index];
    if (known == nullptr) known = &*state_.strings.insert(text).first;
    return known;
  }
  Interner::State& state() const { return state_; }

 private:
  const v1::NodeSnapshot& in_;
  Interner::State& state_;
  mutable std::vector<const std::string*> canonical_;
};

model::Frame decode_frame(const v1::InternedFrame& f, const StringLookup& s) {
  model::Frame out;
  out.kind = f.python() ? model::Frame::Kind::kPython : model::Frame::Kind::kNative;
  out.function = s(f.function());
  out.module = s(f.module());
  out.address = f.address();
  out.offset = f.offset();
  out.module_offset = f.module_offset();
  out.qualname = s(f.qualname());
  out.file = s(f.file());
  out.line = f.line();
  for (const auto& local : f.locals()) out.locals.emplace_back(s(local.name()), local.value());
  return out;
}

// The interner's frame equal to `f`. A frame with locals is its own (no two are compared).
const model::Frame* intern_frame(const v1::InternedFrame& f, const StringLookup& s) {
  auto& state = s.state();
  if (f.locals_size() > 0) {
    auto frame = decode_frame(f, s);
    std::lock_guard lock(state.mutex);
    return &state.frames->emplace_back(std::move(frame));
  }
  std::lock_guard lock(state.mutex);
  const Interner::State::FrameKey key{f.python(),
                                      s.canonical(f.function()),
                                      s.canonical(f.module()),
                                      s.canonical(f.qualname()),
                                      s.canonical(f.file()),
                                      f.address(),
                                      f.offset(),
                                      f.module_offset(),
                                      f.line()};
  auto [it, added] = state.frame_index.emplace(key, nullptr);
  if (added) {
    model::Frame frame;
    frame.kind = key.python ? model::Frame::Kind::kPython : model::Frame::Kind::kNative;
    frame.function = *key.function;
    frame.module = *key.module;
    frame.address = key.address;
    frame.offset = key.offset;
    frame.module_offset = key.module_offset;
    frame.qualname = *key.qualname;
    frame.file = *key.file;
    frame.line = key.line;
    it->second = &state.frames->emplace_back(std::move(frame));
  }
  return it->second;
}

// A stack of interned frames, itself interned: every list of the same frames is one stack.
template <typename Repeated>
model::FrameList decode_frames(const Repeated& frames, const StringLookup& s) {
  if (frames.empty()) return {};
  model::FrameList::Stack stack;
  stack.frames.reserve(static_cast<std::size_t>(frames.size()));
  for (const auto& f : frames) stack.frames.push_back(intern_frame(f, s));
  std::size_t h = stack.frames.size();
  for (const auto* f : stack.frames) mix(h, f);
  auto& state = s.state();
  std::lock_guard lock(state.mutex);
  stack.owner = state.frames;
  return model::FrameList(
      std::shared_ptr<const model::FrameList::Stack>(state.stacks.intern(std::move(stack), h)));
}

char state_letter(const std::string& state) {
  return state.empty() ? '?' : state[0];
}

void encode_distributed(const model::DistributedState& d, v1::DistributedState& out) {
  if (d.rank) out.set_rank(*d.rank);
  if (d.world_size) out.set_world_size(*d.world_size);
  out.set_init_method(valid_utf8(d.init_method));
  out.set_registry(valid_utf8(d.registry));
  for (const auto& [k, v] : d.coordinates) (*out.mutable_coordinates())[valid_utf8(k)] = v;
  for (const auto& g : d.groups) {
    auto* group = out.add_groups();
    group->set_name(valid_utf8(g.name));
    group->set_backend(valid_utf8(g.backend));
    group->set_size(g.size);
    bool identity = true;  // 0..size-1: the size says it all
    for (std::size_t i = 0; i < g.ranks.size() && identity; ++i) {
      identity = g.ranks[i] == static_cast<int>(i);
    }
    if (!identity) {
      for (int r : g.ranks) group->add_ranks(r);
    }
    if (g.group_rank) group->set_group_rank(*g.group_rank);
    if (g.sequence) group->set_sequence(*g.sequence);
    if (g.timeout_ms) group->set_timeout_ms(*g.timeout_ms);
    group->set_is_default(g.is_default);
    for (const auto& l : g.labels) group->add_labels(valid_utf8(l));
    group->set_unregistered(!g.registered);
    group->set_type(valid_utf8(g.type));
    group->set_held_by(valid_utf8(g.held_by));
    group->set_store(valid_utf8(g.store));
    for (const auto& p : g.store_prefixes) group->add_store_prefixes(valid_utf8(p));
    for (const auto& [name, value] : g.counters) (*group->mutable_counters())[name] = value;
  }
  for (const auto& n : d.notes) out.add_notes(valid_utf8(n));
}

model::DistributedState decode_distributed(const v1::DistributedState& in) {
  model::DistributedState d;
  if (in.has_rank()) d.rank = in.rank();
  if (in.has_world_size()) d.world_size = in.world_size();
  d.init_method = in.init_method();
  d.registry = in.registry();
  d.coordinates.insert(in.coordinates().begin(), in.coordinates().end());
  for (const auto& g : in.groups()) {
    model::ProcessGroupState group;
    group.name = g.name();
    group.backend = g.backend();
    group.ranks.assign(g.ranks().begin(), g.ranks().end());
    group.size = g.ranks_size() > 0 ? g.ranks_size() : g.size();
    if (g.has_group_rank()) group.group_rank = g.group_rank();
    if (g.has_sequence()) group.sequence = g.sequence();
    if (g.has_timeout_ms()) group.timeout_ms = g.timeout_ms();
    group.is_default = g.is_default();
    group.labels.assign(g.labels().begin(), g.labels().end());
    group.registered = !g.unregistered();
    group.type = g.type();
    group.held_by = g.held_by();
    group.store = g.store();
    group.store_prefixes.assign(g.store_prefixes().begin(), g.store_prefixes().end());
    group.counters.insert(g.counters().begin(), g.counters().end());
    d.groups.push_back(std::move(group));
  }
  d.notes.assign(in.notes().begin(), in.notes().end());
  return d;
}

}  // namespace

namespace {

// Facts every process of the node has with the same value (GPU, /dev/shm, versions,
// interfaces): sent once, in NodeSnapshot.common_facts.
std::map<std::string, std::string> common_facts(const model::NodeSnapshot& node) {
  std::map<std::string, std::string> common;
  if (node.processes.size() < 2) return common;
  common = node.processes.front().facts;
  for (const auto& r : node.processes) {
    std::erase_if(common, [&](const auto& kv) {
      const auto it = r.facts.find(kv.first);
      return it == r.facts.end() || it->second != kv.second;
    });
  }
  return common;
}

void encode_task(const model::AsyncTask& t, v1::AsyncTask& out, StackTable& stacks) {
  out.set_address(t.address);
  out.set_loop(t.loop);
  if (t.tid) out.set_tid(*t.tid);
  out.set_name(valid_utf8(t.name));
  switch (t.state) {
    case model::AsyncTask::State::kPending:
      out.set_state(v1::AsyncTask::PENDING);
      break;
    case model::AsyncTask::State::kCancelled:
      out.set_state(v1::AsyncTask::CANCELLED);
      break;
    case model::AsyncTask::State::kFinished:
      out.set_state(v1::AsyncTask::FINISHED);
      break;
  }
  out.set_eager(t.eager);
  out.set_running(t.running);
  if (!t.coroutine.empty()) out.set_coroutine_stack(stacks.intern(t.coroutine));
  if (t.awaited_task) out.set_awaited_task(*t.awaited_task);
  out.set_awaits(valid_utf8(t.awaits));
  for (const auto& n : t.notes) out.add_notes(valid_utf8(n));
}

void encode_socket(const model::Socket& s, v1::Socket& out) {
  out.set_family(s.family == model::Socket::Family::kTcp ? v1::Socket::TCP : v1::Socket::UNIX);
  out.set_fd(s.fd);
  out.set_inode(s.inode);
  out.set_type(valid_utf8(s.type));
  out.set_state(std::string(s.state_name()));
  out.set_state_kind(static_cast<v1::SocketState>(s.state));  // numbered as the kernel
  out.set_path(valid_utf8(s.path));  // a path or abstract name is any bytes
  out.set_peer_inode(s.peer_inode);
  out.set_local(valid_utf8(s.local));
  out.set_remote(valid_utf8(s.remote));
  out.set_tx_queue(s.tx_queue);
  out.set_rx_queue(s.rx_queue);
  out.set_retransmits(s.retransmits);
}

void encode_dump(const model::ProcessDump& dump, v1::ProcessSnapshot& p, StackTable& stacks) {
  if (dump.python) p.set_python(valid_utf8(*dump.python));
  for (const auto& n : dump.notes) p.add_notes(valid_utf8(n));
  p.set_max_paused_ns(static_cast<std::uint64_t>(dump.max_paused.count()));
  for (const auto& t : dump.threads) encode_thread(t, *p.add_threads(), stacks);
  if (dump.distributed) encode_distributed(*dump.distributed, *p.mutable_distributed());
  for (const auto& t : dump.tasks) encode_task(t, *p.add_tasks(), stacks);
  for (const auto& s : dump.sockets) encode_socket(s, *p.add_sockets());
}

void encode_process(const model::ProcessRecord& r, const std::map<std::string, std::string>& common,
                    v1::ProcessSnapshot& p, StringTable& strings, StackTable& stacks) {
  p.set_pid(r.pid);
  p.set_ppid(r.ppid);
  p.set_comm(valid_utf8(r.comm));
  p.set_cmdline(valid_utf8(r.cmdline));
  p.set_exe(valid_utf8(r.exe));
  p.set_state(std::string(1, r.state));
  p.set_utime_ticks(r.utime_ticks);
  p.set_stime_ticks(r.stime_ticks);
  p.set_start_time_ticks(r.start_time_ticks);
  encode_identity(r, *p.mutable_identity());
  for (const auto& [k, v] : r.environment)
    (*p.mutable_environment())[valid_utf8(k)] = valid_utf8(v);
  for (const auto& [k, v] : r.facts) {
    if (!common.count(k)) (*p.mutable_facts())[valid_utf8(k)] = valid_utf8(v);
  }
  if (r.flight_record) encode_flight(*r.flight_record, *p.mutable_flight());
  p.set_environment_source(valid_utf8(r.environment_source));
  p.set_error(valid_utf8(r.error));
  for (const auto& log : r.logs) {
    auto* out_log = p.add_logs();
    out_log->set_path(valid_utf8(log.path));
    for (const auto& line : log.lines) out_log->add_line_ids(strings.intern(line));
  }
  if (r.dump) encode_dump(*r.dump, p, stacks);
}

// The stacks a node's threads refer to by index + 1; an index past the table is an error of
// the file.
class StackLookup {
 public:
  explicit StackLookup(std::string node) : node_(std::move(node)) {}
  StackLookup(const v1::NodeSnapshot& in, const StringLookup& s) : node_(in.node_name()) {
    for (const auto& st : in.stacks()) add(decode_frames(st.frames(), s));
  }
  void add(model::FrameList stack) { stacks_.push_back(std::move(stack)); }
  model::FrameList operator()(std::uint32_t id) const {
    if (id == 0 || id > stacks_.size()) {
      throw Error("snapshot of " + node_ + ": stack " + std::to_string(id) +
                  " is not in its stack table (" + std::to_string(stacks_.size()) + " stacks)");
    }
    return stacks_[id - 1];  // a copy shares the frames
  }

 private:
  std::string node_;
  std::vector<model::FrameList> stacks_;
};

// A stack sent inline (schema 1) or as an index into the node's table (schema 2).
template <typename Repeated>
model::FrameList stack_of(std::uint32_t id, const Repeated& inline_frames, const StringLookup& s,
                          const StackLookup& stacks) {
  return id ? stacks(id) : decode_frames(inline_frames, s);
}

// A thread's probe tally; one that cannot be true (pairs cut short, out of order, more probes
// than were taken) is refused with the thread named.
model::ProbeTally decode_probes(const v1::ProbeTally& in, pid_t tid) {
  const auto refuse = [&](const std::string& why) {
    return Error("thread " + std::to_string(tid) + ": probe tally " + why);
  };
  if (in.kept_frames_size() != in.kept_probes_size()) {
    throw refuse("has " + std::to_string(in.kept_frames_size()) + " depths but " +
                 std::to_string(in.kept_probes_size()) + " counts");
  }
  model::ProbeTally out;
  out.taken = in.taken();
  std::uint64_t counted = 0;
  for (int i = 0; i < in.kept_frames_size(); ++i) {
    if (i > 0 && in.kept_frames(i) <= in.kept_frames(i - 1)) {
      throw refuse("lists depths out of order");
    }
    counted += in.kept_probes(i);
    out.kept.emplace_back(in.kept_frames(i), in.kept_probes(i));
  }
  if (counted > out.taken) {
    throw refuse("counts " + std::to_string(counted) + " probes of " + std::to_string(out.taken) +
                 " taken");
  }
  return out;
}

model::ThreadDump decode_thread(const v1::ThreadSnapshot& t, const StringLookup& s,
                                const StackLookup& stacks) {
  model::ThreadDump thread;
  thread.tid = t.tid();
  thread.name = t.name();
  thread.state = state_letter(t.state());
  thread.wchan = t.wchan();
  if (t.has_py_thread_id()) thread.py_thread_id = t.py_thread_id();
  if (t.has_py_thread_name()) thread.py_thread_name = t.py_thread_name();
  thread.holds_gil = t.holds_gil();
  thread.merge = t.merge();
  thread.native_frames = stack_of(t.native_stack(), t.native_frames(), s, stacks);
  thread.python_frames = stack_of(t.python_stack(), t.python_frames(), s, stacks);
  switch (t.merged_from()) {
    case v1::ThreadSnapshot::MERGED_NATIVE:
      thread.frames = thread.native_frames;
      break;
    case v1::ThreadSnapshot::MERGED_PYTHON:
      thread.frames = thread.python_frames;
      break;
    default:
      thread.frames = stack_of(t.merged_stack(), t.frames(), s, stacks);
  }
  thread.notes.assign(t.notes().begin(), t.notes().end());
  thread.kernel_stack.assign(t.kernel_stack().begin(), t.kernel_stack().end());
  thread.paused = std::chrono::nanoseconds(t.paused_ns());
  thread.utime_ticks = t.utime_ticks();
  thread.stime_ticks = t.stime_ticks();
  thread.context_switches = t.context_switches();
  if (t.has_probes()) thread.probes = decode_probes(t.probes(), thread.tid);
  return thread;
}

void decode_identity(const v1::RankIdentity& id, model::ProcessRecord& r) {
  // Older files carry the role as text only: read once, here (the migration).
  r.identity.role = role_of(id);
  if (id.has_rank()) r.identity.rank = id.rank();
  if (id.has_local_rank()) r.identity.local_rank = id.local_rank();
  if (id.has_world_size()) r.identity.world_size = id.world_size();
  if (id.has_tp()) r.identity.tp = id.tp();
  if (id.has_pp()) r.identity.pp = id.pp();
  if (id.has_dp()) r.identity.dp = id.dp();
  r.identity.source = identity_source_of(id);
  r.identity.job = id.job();
  r.identity.title = id.title();
  r.helper_of = id.helper_of();
  r.identity.sources.insert(id.sources().begin(), id.sources().end());
}

model::AsyncTask decode_task(const v1::AsyncTask& t, const StackLookup& stacks) {
  model::AsyncTask task;
  task.address = t.address();
  task.loop = t.loop();
  if (t.has_tid()) task.tid = t.tid();
  task.name = t.name();
  switch (t.state()) {
    case v1::AsyncTask::CANCELLED:
      task.state = model::AsyncTask::State::kCancelled;
      break;
    case v1::AsyncTask::FINISHED:
      task.state = model::AsyncTask::State::kFinished;
      break;
    default:  // PENDING, or a state a newer writer added
      task.state = model::AsyncTask::State::kPending;
  }
  task.eager = t.eager();
  task.running = t.running();
  if (t.coroutine_stack() != 0) task.coroutine = stacks(t.coroutine_stack());
  if (t.has_awaited_task()) task.awaited_task = t.awaited_task();
  task.awaits = t.awaits();
  task.notes.assign(t.notes().begin(), t.notes().end());
  return task;
}

// The state when written typed (schema 2.6: the kernel's number), else the text older writers sent,
// read once here.
model::SocketState socket_state_of(const v1::Socket& in, model::Socket::Family family) {
  const auto number = static_cast<unsigned>(in.state_kind());
  if (in.state_kind() != v1::SOCKET_STATE_UNSPECIFIED &&
      model::socket_state_from_kernel(number) != model::SocketState::kUnknown) {
    return model::socket_state_from_kernel(number);
  }
  return family == model::Socket::Family::kUnix ? model::parse_unix_state(in.state())
                                                : model::parse_tcp_state(in.state());
}

model::Socket decode_socket(const v1::Socket& in) {
  model::Socket s;
  s.family =
      in.family() == v1::Socket::TCP ? model::Socket::Family::kTcp : model::Socket::Family::kUnix;
  s.fd = in.fd();
  s.inode = in.inode();
  s.type = in.type();
  s.state = socket_state_of(in, s.family);
  s.path = in.path();
  s.peer_inode = in.peer_inode();
  s.local = in.local();
  s.remote = in.remote();
  s.tx_queue = in.tx_queue();
  s.rx_queue = in.rx_queue();
  s.retransmits = in.retransmits();
  return s;
}

model::ProcessDump decode_dump(const v1::ProcessSnapshot& p, const StringLookup& s,
                               const StackLookup& stacks) {
  model::ProcessDump dump;
  dump.pid = p.pid();
  dump.command = p.comm();
  if (!p.python().empty()) dump.python = p.python();
  dump.notes.assign(p.notes().begin(), p.notes().end());
  dump.max_paused = std::chrono::nanoseconds(p.max_paused_ns());
  for (const auto& t : p.threads()) dump.threads.push_back(decode_thread(t, s, stacks));
  if (p.has_distributed()) dump.distributed = decode_distributed(p.distributed());
  for (const auto& t : p.tasks()) dump.tasks.push_back(decode_task(t, stacks));
  if (p.sockets_size() > 0) {
    std::vector<model::Socket> sockets;
    sockets.reserve(static_cast<std::size_t>(p.sockets_size()));
    for (const auto& socket : p.sockets()) sockets.push_back(decode_socket(socket));
    dump.sockets =
        model::Shared<std::vector<model::Socket>>(intern_sockets(s.state(), std::move(sockets)));
  }
  return dump;
}

model::ProcessRecord decode_process(const v1::ProcessSnapshot& p,
                                    const google::protobuf::Map<std::string, std::string>& common,
                                    const StringLookup& s, const StackLookup& stacks) {
  model::ProcessRecord r;
  r.pid = p.pid();
  r.ppid = p.ppid();
  r.comm = p.comm();
  r.cmdline = p.cmdline();
  r.exe = p.exe();
  r.state = state_letter(p.state());
  r.utime_ticks = p.utime_ticks();
  r.stime_ticks = p.stime_ticks();
  r.start_time_ticks = p.start_time_ticks();
  decode_identity(p.identity(), r);
  r.environment.insert(p.environment().begin(), p.environment().end());
  if (!p.facts().empty() || !common.empty()) {
    std::map<std::string, std::string> facts(p.facts().begin(), p.facts().end());
    facts.insert(common.begin(), common.end());
    r.facts = model::Shared<std::map<std::string, std::string>>(
        intern_facts(s.state(), std::move(facts)));
  }
  if (p.has_flight()) {
    r.flight_record = decode_flight(p.flight());
  } else if (!p.flight_record().empty()) {
    r.flight_record = decode_flight_json(p.flight_record());  // schema 2.0
  }
  r.environment_source = p.environment_source();
  r.error = p.error();
  for (const auto& log : p.logs()) {
    std::vector<std::string> lines(log.lines().begin(), log.lines().end());
    for (const auto line_id : log.line_ids()) lines.push_back(s(line_id));
    r.logs.push_back({log.path(), model::Shared<std::vector<std::string>>(
                                      intern_lines(s.state(), std::move(lines)))});
  }
  if (r.error.empty() || p.threads_size() > 0) r.dump = decode_dump(p, s, stacks);
  return r;
}

void check_schema(const v1::NodeSnapshot& in) {
  if (in.schema_major() > kSchemaMajor) {
    throw Error("snapshot schema " + std::to_string(in.schema_major()) + "." +
                std::to_string(in.schema_minor()) + " is newer than this hangscope reads (" +
                std::to_string(kSchemaMajor) + ".x): upgrade hangscope");
  }
  if (in.schema_major() == 0) throw Error("not a hangscope node snapshot (no schema version)");
}

}  // namespace

void encode(const model::NodeSnapshot& node, v1::NodeSnapshot& out) {
  out.Clear();
  out.set_schema_major(kSchemaMajor);
  out.set_schema_minor(kSchemaMinor);
  out.set_node_name(valid_utf8(node.node_name));
  out.set_hostname(valid_utf8(node.hostname));
  out.set_capture_unix_ns(node.capture_unix_ns);
  out.set_agent_version(kVersion);
  out.set_sample_index(node.sample_index);
  out.set_capture_ns(static_cast<std::uint64_t>(node.capture_time.count()));
  for (const auto& n : node.notes) out.add_notes(valid_utf8(n));
  StringTable strings(out);
  StackTable stacks(out, strings);
  const auto common = common_facts(node);
  for (const auto& [k, v] : common) (*out.mutable_common_facts())[valid_utf8(k)] = valid_utf8(v);
  for (const auto& r : node.processes) {
    encode_process(r, common, *out.add_processes(), strings, stacks);
  }
}

namespace {

// A node's header: everything but its processes, stacks and strings.
model::NodeSnapshot decode_header(const v1::NodeSnapshot& in) {
  model::NodeSnapshot node;
  node.node_name = in.node_name();
  node.hostname = in.hostname();
  node.capture_unix_ns = in.capture_unix_ns();
  node.sample_index = in.sample_index();
  node.capture_time = std::chrono::nanoseconds(in.capture_ns());
  node.notes.assign(in.notes().begin(), in.notes().end());
  return node;
}

}  // namespace

model::NodeSnapshot decode(const v1::NodeSnapshot& in, Interner* interner) {
  check_schema(in);
  Interner own;
  const StringLookup s(in, (interner != nullptr ? *interner : own).state());
  const StackLookup stacks(in, s);
  model::NodeSnapshot node = decode_header(in);
  for (const auto& p : in.processes()) {
    node.processes.push_back(decode_process(p, in.common_facts(), s, stacks));
  }
  return node;
}

model::NodeSnapshot as_transmitted(const model::NodeSnapshot& node) {
  v1::NodeSnapshot message;
  encode(node, message);
  return decode(message);
}

namespace {

bool is_binary(const std::string& path) {
  return path.size() > 3 && path.ends_with(".pb");
}

}  // namespace

void write_file(const std::string& path, const std::vector<model::NodeSnapshot>& nodes) {
  std::vector<const model::NodeSnapshot*> pointers;
  for (const auto& node : nodes) pointers.push_back(&node);
  write_file(path, pointers);
}

void write_file(const std::string& path, const std::vector<const model::NodeSnapshot*>& nodes) {
  // The binary form first, the message freed before the file is written: a snapshot of many
  // processes is held as a message, then as bytes, never as both and its JSON text at once.
  std::string binary;
  {
    v1::SnapshotFile file;
    for (const auto* node : nodes) encode(*node, *file.add_snapshots());
    // Deterministic: map entries in key order, as MessageToJsonString writes them.
    google::protobuf::io::StringOutputStream string_out(&binary);
    google::protobuf::io::CodedOutputStream coded(&string_out);
    coded.SetSerializationDeterministic(true);
    if (!file.SerializeToCodedStream(&coded)) {
      throw Error("cannot encode snapshots for " + path);
    }
  }
  ReplacingFile file(path);  // a new file beside path, renamed over it once whole
  {
    google::protobuf::io::FileOutputStream out(file.fd());
    out.SetCloseOnDelete(false);  // the ReplacingFile closes it
    bool written = true;
    google::protobuf::util::Status converted;
    if (is_binary(path)) {
      written = out.WriteAliasedRaw(binary.data(), static_cast<int>(binary.size()));
    } else {
      // The JSON text is produced into the file as it is converted (BinaryToJsonStream).
      google::protobuf::util::JsonPrintOptions options;
      options.add_whitespace = true;
      options.preserve_proto_field_names = true;
      const auto* type = v1::SnapshotFile::descriptor();
      const std::unique_ptr<google::protobuf::util::TypeResolver> resolver(
          google::protobuf::util::NewTypeResolverForDescriptorPool("type.googleapis.com",
                                                                   type->file()->pool()));
      google::protobuf::io::ArrayInputStream in(binary.data(), static_cast<int>(binary.size()));
      converted = google::protobuf::util::BinaryToJsonStream(
          resolver.get(), "type.googleapis.com/" + type->full_name(), &in, &out, options);
    }
    const bool flushed = out.Flush();
    if (!converted.ok()) {
      throw Error("cannot encode snapshots for " + path + ": " + converted.ToString());
    }
    if (!written || !flushed) throw_errno("cannot write " + path, out.GetErrno());
  }
  file.commit();
}

namespace {

// What decoding a snapshot file will cost, estimated from its bytes before anything is built
// (docs/security.md, "Amplification"). Protobuf bounds the nesting (100 levels) but not the
// count: `{}` is 2 bytes of JSON (an empty field is 2 bytes of binary) and becomes a message of
// ~300 bytes, then a decoded snapshot, so 9 MB of them took 941 MB. Real snapshots estimate at
// about 3 times their size in JSON and 29 times in binary (measured on deep-stack captures of
// 0.2-141 MB; their peak is 4x and 43x). A file is refused before it is parsed when its
// estimate is over kDecodeFactor (JSON) or kDecodeFactorBinary times its size, or over
// kDecodeOverInput times the input limit (--max-input-mib), and over kDecodeFloor.
constexpr std::size_t kMessageBytes = 320;  // a message object and its decoded struct
constexpr std::size_t kStringBytes = 32;    // a std::string, besides its bytes
constexpr std::size_t kScalarBytes = 8;
constexpr std::size_t kDecodeFactor = 8;
constexpr std::size_t kDecodeFactorBinary = 64;
constexpr std::size_t kDecodeOverInput = 8;
constexpr std::size_t kDecodeFloor = std::size_t{64} << 20;

struct DecodeCost {
  std::size_t bytes = 0;
  std::size_t messages = 0;
  std::size_t strings = 0;
};

// JSON: objects are messages, strings (not keys) strings, numbers and literals scalars.
DecodeCost json_cost(const std::string& text) {
  DecodeCost cost;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{') {
      ++cost.messages;
      cost.bytes += kMessageBytes;
    } else if (c == '"') {
      const std::size_t start = ++i;
      while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      std::size_t next = i + 1;
      while (next < text.size() && std::isspace(static_cast<unsigned char>(text[next])) != 0) {
        ++next;
      }
      if (next >= text.size() || text[next] != ':') {  // a value, not a key
        ++cost.strings;
        cost.bytes += kStringBytes + std::min(i, text.size()) - start;
      }
    } else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
      cost.bytes += kScalarBytes;
      while (i + 1 < text.size() && std::isalnum(static_cast<unsigned char>(text[i + 1])) != 0) {
        ++i;  // the rest of the number or literal
      }
    }
  }
  return cost;
}

// Binary: walks the wire format with the schema (message fields are recursed into, to
// protobuf's own depth), without building anything.
void binary_cost(google::protobuf::io::CodedInputStream& in,
                 const google::protobuf::Descriptor* type, int depth, DecodeCost& cost) {
  using google::protobuf::FieldDescriptor;
  using google::protobuf::internal::WireFormatLite;
  for (std::uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
    const auto* field = type->FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      cost.bytes += kScalarBytes;
      if (!WireFormatLite::SkipField(&in, tag)) return;  // malformed: the parser will say so
      continue;
    }
    std::uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return;
    if (field != nullptr && field->type() == FieldDescriptor::TYPE_MESSAGE && depth < 100) {
      ++cost.messages;
      cost.bytes += kMessageBytes;
      const auto limit = in.PushLimit(static_cast<int>(length));
      binary_cost(in, field->message_type(), depth + 1, cost);
      in.PopLimit(limit);
    } else {
      // A string, or packed scalars (a byte each at least, 8 bytes decoded).
      const bool text = field != nullptr && (field->type() == FieldDescriptor::TYPE_STRING ||
                                             field->type() == FieldDescriptor::TYPE_BYTES);
      cost.strings += text ? 1 : 0;
      cost.bytes += text ? kStringBytes + length : kScalarBytes * length;
      if (!in.Skip(static_cast<int>(length))) return;
    }
  }
}

void check_decode_cost(const std::string& bytes, bool binary, const std::string& path,
                       std::size_t max_input_bytes) {
  DecodeCost cost;
  if (binary) {
    google::protobuf::io::CodedInputStream in(
        reinterpret_cast<const std::uint8_t*>(bytes.data()),
        static_cast<int>(std::min<std::size_t>(bytes.size(), std::numeric_limits<int>::max())));
    binary_cost(in, v1::SnapshotFile::descriptor(), 0, cost);
  } else {
    cost = json_cost(bytes);
  }
  if (cost.bytes <= kDecodeFloor) return;
  const std::size_t factor = binary ? kDecodeFactorBinary : kDecodeFactor;
  const std::string estimate = "decoding it would take about " + std::to_string(cost.bytes >> 20) +
                               " MiB (" + std::to_string(cost.messages) + " messages, " +
                               std::to_string(cost.strings) + " strings)";
  if (cost.bytes / factor > bytes.size()) {
    throw Error("snapshot file " + printable(path) + ": refused: " + estimate + ", more than " +
                std::to_string(factor) + " times its size (real " +
                (binary ? "binary snapshots take about 30" : "JSON snapshots take about 3") +
                " times theirs)");
  }
  if (cost.bytes / kDecodeOverInput > max_input_bytes) {
    throw Error("snapshot file " + printable(path) + ": refused: " + estimate + ", more than " +
                std::to_string(kDecodeOverInput) + " times the input limit of " +
                std::to_string(max_input_bytes >> 20) + " MiB (--max-input-mib)");
  }
}

// The file's bytes as protobuf reads them, a block at a time, counted into `task` ("parsing:
// 45 MB of 100 MB"): what JsonStringToMessage and ParseFromString do, with progress.
class CountingInput : public google::protobuf::io::ZeroCopyInputStream {
 public:
  CountingInput(const std::string& bytes, ProgressMeter::Task* task)
      : in_(bytes.data(), static_cast<int>(bytes.size()), kBlock), task_(task) {}
  bool Next(const void** data, int* size) override {
    if (!in_.Next(data, size)) return false;
    if (task_ != nullptr) task_->set_done(static_cast<std::uint64_t>(in_.ByteCount()));
    return true;
  }
  void BackUp(int count) override { in_.BackUp(count); }
  bool Skip(int count) override { return in_.Skip(count); }
  std::int64_t ByteCount() const override { return in_.ByteCount(); }

 private:
  static constexpr int kBlock = 1 << 20;
  google::protobuf::io::ArrayInputStream in_;
  ProgressMeter::Task* task_;
};

// The file's bytes in protobuf's binary form: a binary file's own (moved), a JSON file's converted
// (the JSON text is freed on return: the text and the binary form are held together only while
// converting). Checks the decoding cost first.
std::string wire_form(std::string bytes, bool binary, const std::string& path,
                      std::size_t max_input_bytes, ProgressMeter::Task* task) {
  if (task != nullptr) task->stage("checking");
  check_decode_cost(bytes, binary, path, max_input_bytes);
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw Error("snapshot file " + printable(path) + ": refused: larger than 2 GiB");
  }
  if (binary) return bytes;
  if (task != nullptr) task->stage("parsing", bytes.size(), ProgressMeter::Unit::kBytes);
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // newer minor versions add fields
  const std::unique_ptr<google::protobuf::util::TypeResolver> resolver(
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          "type.googleapis.com", google::protobuf::DescriptorPool::generated_pool()));
  std::string binary_form;
  CountingInput in(bytes, task);
  google::protobuf::io::StringOutputStream out(&binary_form);
  const auto status = google::protobuf::util::JsonToBinaryStream(
      resolver.get(), "type.googleapis.com/" + v1::SnapshotFile::descriptor()->full_name(), &in,
      &out, options);
  if (!status.ok()) {
    // The parser's message may quote the file's bytes: escaped, never printed raw.
    throw Error("snapshot file " + printable(path) +
                ": not a hangscope snapshot: " + printable(std::string(status.message())));
  }
  return binary_form;
}

// One field of a message on the wire: its number, its payload when length-delimited, and all
// its bytes (tag included).
struct WireField {
  std::uint32_t number = 0;
  bool delimited = false;
  std::string_view payload;
  std::string_view whole;
};

const char kNotBinary[] = "not a hangscope snapshot (binary protobuf expected)";

// The fields of a message's wire bytes, in their order, each checked to be whole (a field cut
// short, or a tag that is none, is an error: as protobuf's parser, which then reads them).
std::vector<WireField> wire_fields(std::string_view message) {
  using google::protobuf::internal::WireFormatLite;
  std::vector<WireField> fields;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const std::uint8_t*>(message.data()),
                                            static_cast<int>(message.size()));
  while (true) {
    const auto start = static_cast<std::size_t>(in.CurrentPosition());
    const std::uint32_t tag = in.ReadTag();
    if (tag == 0) {
      if (start != message.size()) throw Error(kNotBinary);
      return fields;
    }
    WireField field;
    field.number = WireFormatLite::GetTagFieldNumber(tag);
    if (WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      std::uint32_t length = 0;
      if (!in.ReadVarint32(&length)) throw Error(kNotBinary);
      const auto at = static_cast<std::size_t>(in.CurrentPosition());
      if (!in.Skip(static_cast<int>(length))) throw Error(kNotBinary);
      field.delimited = true;
      field.payload = message.substr(at, length);
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      throw Error(kNotBinary);
    }
    field.whole = message.substr(start, static_cast<std::size_t>(in.CurrentPosition()) - start);
    fields.push_back(field);
  }
}

// One node snapshot decoded from its wire bytes without building its whole message: the header
// (every field but its processes and stacks: the strings, the names, common facts, notes) parsed
// as a message, then each stack and each process parsed and decoded one at a time.
model::NodeSnapshot decode_node_wire(std::string_view bytes, Interner::State& state) {
  constexpr std::uint32_t kProcesses = 9, kStacks = 12;  // NodeSnapshot's field numbers
  std::string header;
  std::vector<std::string_view> processes, stacks;
  for (const auto& field : wire_fields(bytes)) {
    if (field.delimited && field.number == kProcesses) {
      processes.push_back(field.payload);
    } else if (field.delimited && field.number == kStacks) {
      stacks.push_back(field.payload);
    } else {
      header.append(field.whole);
    }
  }
  v1::NodeSnapshot head;
  if (!head.ParseFromString(header)) throw Error(kNotBinary);
  header.clear();
  check_schema(head);
  const StringLookup s(head, state);
  StackLookup lookup(head.node_name());
  {
    v1::Stack stack;
    for (const auto piece : stacks) {
      if (!stack.ParseFromArray(piece.data(), static_cast<int>(piece.size()))) {
        throw Error(kNotBinary);
      }
      lookup.add(decode_frames(stack.frames(), s));
    }
  }
  model::NodeSnapshot node = decode_header(head);
  v1::ProcessSnapshot process;
  for (const auto piece : processes) {
    if (!process.ParseFromArray(piece.data(), static_cast<int>(piece.size()))) {
      throw Error(kNotBinary);
    }
    node.processes.push_back(decode_process(process, head.common_facts(), s, lookup));
  }
  return node;
}

// A snapshot file's wire bytes (SnapshotFile: its snapshots, field 1) decoded node by node.
std::vector<model::NodeSnapshot> decode_file(const std::string& wire, const std::string& path,
                                             ProgressMeter::Task* task, Interner::State& state) {
  std::vector<std::string_view> snapshots;
  try {
    for (const auto& field : wire_fields(wire)) {
      if (field.number != 1) continue;  // a field a newer minor added
      if (!field.delimited) throw Error(kNotBinary);
      snapshots.push_back(field.payload);
    }
  } catch (const Error& e) {
    throw Error("snapshot file " + printable(path) + ": " + e.what());
  }
  if (snapshots.empty()) {
    throw Error("snapshot file " + printable(path) + ": holds no snapshot");
  }
  if (task != nullptr) task->stage("decoding", static_cast<std::uint64_t>(snapshots.size()));
  std::vector<model::NodeSnapshot> nodes;
  for (const auto snapshot : snapshots) {
    try {
      nodes.push_back(decode_node_wire(snapshot, state));
      if (task != nullptr) task->set_done(nodes.size());
    } catch (const Error& e) {
      throw Error("snapshot file " + printable(path) + ": " + printable(e.what()));
    }
  }
  return nodes;
}

}  // namespace

namespace {

// The per-file boundary: a file that needs more memory than there is (std::bad_alloc) or a size
// the library cannot hold (std::length_error) is refused as that file, never the end of the
// process; the caller goes on with the other files.
template <typename Read>
std::vector<model::NodeSnapshot> refused_if_too_large(const std::string& path, Read&& read) {
  try {
    return read();
  } catch (const std::bad_alloc&) {
    throw Error("snapshot file " + printable(path) +
                ": refused: out of memory while reading it (the file decodes to more than the "
                "process can hold)");
  } catch (const std::length_error& e) {
    throw Error("snapshot file " + printable(path) + ": refused: a size beyond what can be held (" +
                printable(e.what()) + ")");
  }
}

}  // namespace

std::vector<model::NodeSnapshot> read_file(const std::string& path, std::size_t max_bytes,
                                           Links links, ProgressMeter::Task* task,
                                           Interner* interner) {
  return refused_if_too_large(path, [&] {
    if (task != nullptr) task->stage("reading");
    const std::string wire =
        wire_form(read_input_file(path, "snapshot file", max_bytes, InputKind::kRegularFile, links),
                  is_binary(path), path, max_bytes, task);
    Interner own;
    return decode_file(wire, path, task, (interner != nullptr ? *interner : own).state());
  });
}

std::vector<model::NodeSnapshot> parse_file(const std::string& bytes, bool binary,
                                            const std::string& path, Interner* interner) {
  return refused_if_too_large(path, [&] {
    const std::string wire = wire_form(bytes, binary, path, kDefaultMaxInputBytes, nullptr);
    Interner own;
    return decode_file(wire, path, nullptr, (interner != nullptr ? *interner : own).state());
  });
}

}  // namespace hangscope::snapshot
