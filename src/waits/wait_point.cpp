#include "hangscope/waits/wait_point.h"

#include <algorithm>
#include <array>
#include <regex>
#include <vector>

#include "hangscope/model/frame_pattern.h"
#include "hangscope/waits/frameworks.h"

namespace hangscope::waits {
namespace {

using model::Frame;

// How much a match says: a peer-facing primitive beats a generic lock or sleep under it.
enum class Tier { kNone = 0, kGeneric = 1, kSpecific = 2 };

struct Match {
  Tier tier = Tier::kNone;
  WaitKind kind = WaitKind::kOther;
  std::string operation;
};

// The C library's and CPython's generic blocking calls (no framework's), compared by exact name
// after libc's decorations are removed.
struct GenericRule {
  std::string_view name;
  WaitKind kind;
};
const std::array kGenericRules = {
    GenericRule{"take_gil", WaitKind::kLock},
    GenericRule{"PyThread_acquire_lock_timed", WaitKind::kLock},
    GenericRule{"pthread_cond_wait", WaitKind::kLock},
    GenericRule{"pthread_cond_timedwait", WaitKind::kLock},
    GenericRule{"pthread_cond_clockwait", WaitKind::kLock},
    GenericRule{"pthread_mutex_lock", WaitKind::kLock},
    GenericRule{"lll_lock_wait", WaitKind::kLock},
    GenericRule{"pthread_join", WaitKind::kLock},
    GenericRule{"sem_wait", WaitKind::kLock},
    GenericRule{"sem_timedwait", WaitKind::kLock},
    GenericRule{"sem_clockwait", WaitKind::kLock},
    GenericRule{"futex_abstimed_wait_common", WaitKind::kLock},
    GenericRule{"futex_abstimed_wait_common64", WaitKind::kLock},
    GenericRule{"std::condition_variable::wait", WaitKind::kLock},
    GenericRule{"clock_nanosleep", WaitKind::kSleep},
    GenericRule{"nanosleep", WaitKind::kSleep},
    GenericRule{"usleep", WaitKind::kSleep},
    GenericRule{"sleep", WaitKind::kSleep},
    GenericRule{"poll", WaitKind::kSleep},
    GenericRule{"ppoll", WaitKind::kSleep},
    GenericRule{"select", WaitKind::kSleep},
    GenericRule{"pselect", WaitKind::kSleep},
    GenericRule{"pselect6", WaitKind::kSleep},
    GenericRule{"epoll_wait", WaitKind::kSleep},
    GenericRule{"epoll_pwait", WaitKind::kSleep},
    GenericRule{"accept", WaitKind::kSleep},
    GenericRule{"accept4", WaitKind::kSleep},
    GenericRule{"recv", WaitKind::kSleep},
    GenericRule{"recvmsg", WaitKind::kSleep},
    GenericRule{"read", WaitKind::kSleep},
    GenericRule{"wait4", WaitKind::kSleep},
    GenericRule{"waitpid", WaitKind::kSleep},
};

// "__GI___pthread_cond_wait" → "pthread_cond_wait"; "foo(int)" → "foo"; "x@GLIBC" → "x".
std::string bare_name(std::string_view symbol) {
  if (const auto paren = symbol.find('('); paren != std::string_view::npos && paren > 0) {
    symbol = symbol.substr(0, paren);
  }
  if (const auto at = symbol.find('@'); at != std::string_view::npos) symbol = symbol.substr(0, at);
  for (std::string_view prefix : {"__GI_", "__libc_", "__internal_"}) {
    if (symbol.substr(0, prefix.size()) == prefix) symbol.remove_prefix(prefix.size());
  }
  while (!symbol.empty() && symbol.front() == '_') symbol.remove_prefix(1);
  return std::string(symbol);
}

Match match_python(const Frame& frame) {
  for (const auto* table : frameworks()) {
    for (const auto& rule : table->python_waits) {
      if (!rule.pattern.matches(frame)) continue;
      const Tier tier = waits_on_peers(rule.kind) ? Tier::kSpecific : Tier::kGeneric;
      return {tier, rule.kind,
              rule.operation.empty() ? frame.function : std::string(rule.operation)};
    }
  }
  return {};
}

Match match_native(const Frame& frame) {
  const std::string name = bare_name(frame.function);
  if (name.empty()) return {};
  for (const auto* table : frameworks()) {
    for (const auto& rule : table->native_waits) {
      if (rule.pattern.matches_symbol(name)) {
        return {Tier::kSpecific, rule.kind, std::string(rule.operation)};
      }
    }
  }
  for (const auto& rule : kGenericRules) {
    if (name == rule.name) return {Tier::kGeneric, rule.kind, std::string(rule.name)};
  }
  return {};
}

Match match_frame(const Frame& frame) {
  return frame.kind == Frame::Kind::kPython ? match_python(frame) : match_native(frame);
}

// torch, Ray and the standard library: where primitives live, not where users call them.
bool is_library_file(const std::string& file) {
  // No path is longer than PATH_MAX; std::regex recurses once per character of `[^/]+` and
  // overflowed the stack on a 60,000-character file name (a snapshot file's frame).
  if (file.size() > 4096) return false;
  static const std::regex library(
      R"((/(site|dist)-packages/(torch|ray)/)|(/lib/python3\.\d+t?/[^/]+\.py$)|)"
      R"((/lib/python3\.\d+t?/(asyncio|concurrent|multiprocessing|importlib)/))");
  return std::regex_search(file, library);
}

CallSite call_site(const Frame& frame) {
  return {frame.function, frame.qualname.empty() ? frame.function : frame.qualname, frame.file,
          frame.line};
}

// The thread's stack, innermost first: the merged view, else Python then native frames.
const model::FrameList& stack_of(const model::ThreadDump& thread) {
  if (!thread.frames.empty()) return thread.frames;
  return thread.python_frames.empty() ? thread.native_frames : thread.python_frames;
}

}  // namespace

std::string_view to_string(WaitKind kind) {
  switch (kind) {
    case WaitKind::kCollective:
      return "collective";
    case WaitKind::kStore:
      return "store";
    case WaitKind::kRendezvous:
      return "rendezvous";
    case WaitKind::kChannel:
      return "channel";
    case WaitKind::kRing:
      return "ring";
    case WaitKind::kLock:
      return "lock";
    case WaitKind::kSleep:
      return "sleep";
    case WaitKind::kCpu:
      return "cpu";
    case WaitKind::kOther:
      return "other";
  }
  return "other";
}

bool waits_on_peers(WaitKind kind) {
  return kind == WaitKind::kCollective || kind == WaitKind::kStore ||
         kind == WaitKind::kRendezvous || kind == WaitKind::kChannel || kind == WaitKind::kRing;
}

std::string short_path(const std::string& file) {
  for (const std::string marker : {"/site-packages/", "/dist-packages/"}) {
    if (const auto at = file.rfind(marker); at != std::string::npos) {
      return file.substr(at + marker.size());
    }
  }
  // Elsewhere the last two components.
  const auto last = file.rfind('/');
  if (last == std::string::npos || last == 0) return file;
  const auto before = file.rfind('/', last - 1);
  return before == std::string::npos ? file : file.substr(before + 1);
}

std::string CallSite::text() const {
  std::string out = qualname.empty() ? function : qualname;
  if (!file.empty()) out += " (" + short_path(file) + ":" + std::to_string(line) + ")";
  return out;
}

std::string WaitPoint::operation_key() const {
  std::string key = std::string(to_string(kind)) + "|" + operation;
  if (python) key += "|" + python->file + ":" + std::to_string(python->line);
  return key;
}

std::string WaitPoint::class_key() const {
  std::string key = operation_key() + "|" + primitive;
  if (python) key += "|" + python->function;
  if (caller) key += "|" + caller->file + ":" + std::to_string(caller->line);
  return key;
}

std::string WaitPoint::describe() const {
  std::string out;
  if (python) {
    const bool named_by_frame =
        operation.empty() || operation == python->function || kind == WaitKind::kCpu;
    out = (named_by_frame ? "" : operation + " in ") + python->text();
    if (caller && (caller->file != python->file || caller->line != python->line)) {
      out += " <- " + caller->text();
    }
  } else {
    out = operation.empty() ? std::string(to_string(kind)) : operation;
    if (!primitive.empty() && primitive != operation) out += " (" + primitive + ")";
  }
  return out;
}

std::string WaitPoint::arguments() const {
  std::vector<std::string> parts;
  const auto add = [&](const std::string& label, const std::optional<std::string>& value) {
    if (value && !value->empty() && *value != "None") parts.push_back(label + ": " + *value);
  };
  if (kind == WaitKind::kCollective || kind == WaitKind::kRendezvous) {
    // The group a collective runs on: its ranks where a caller names them, else the object.
    const auto group = local("group");
    if (const auto ranks = local("group_ranks") ? local("group_ranks") : local("ranks")) {
      parts.push_back("group ranks: " + *ranks);
    } else if (group && *group == "None") {
      parts.push_back("group: the default group (world)");
    } else {
      add("group", group);
    }
    add("group_name", local("group_name"));
    add("src", local("src"));
    add("dst", local("dst"));
    // An opaque repr ("<Tensor>") says nothing; a simple one (a list of numbers) does.
    if (const auto tensor = local("tensor"); tensor && tensor->rfind('<', 0) != 0) {
      add("tensor", tensor);
    }
  }
  if (kind == WaitKind::kStore) {
    add("key", local("key"));
    add("keys", local("keys"));
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

std::optional<std::string> WaitPoint::local(std::string_view name) const {
  for (const auto& frame : frame_locals) {
    for (const auto& [key, value] : frame) {
      if (key == name) return value;
    }
  }
  return std::nullopt;
}

WaitPoint classify_thread(const model::ThreadDump& thread) {
  const auto& frames = stack_of(thread);
  WaitPoint point;
  point.tid = thread.tid;
  // The best tier wins; within it a Python match (it names the operation), else the innermost.
  std::size_t chosen = frames.size();
  Match best;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const Match m = match_frame(frames[i]);
    if (m.tier == Tier::kNone) continue;
    const bool python = frames[i].kind == Frame::Kind::kPython;
    const bool better = m.tier > best.tier || (m.tier == best.tier && python &&
                                               frames[chosen].kind != Frame::Kind::kPython);
    if (better) {
      best = m;
      chosen = i;
    }
  }
  if (best.tier != Tier::kNone) {
    point.kind = best.kind;
    point.operation = best.operation;
    point.primitive = frames[chosen].function;
  }
  // The Python frame at or outside the primitive, its callers' locals, and the user's caller.
  const std::size_t from = chosen == frames.size() ? 0 : chosen;
  for (std::size_t i = from; i < frames.size(); ++i) {
    const auto& frame = frames[i];
    if (frame.kind != Frame::Kind::kPython) continue;
    if (!point.python) point.python = call_site(frame);
    if (point.frame_locals.size() < 3) point.frame_locals.push_back(frame.locals);
    if (!point.caller && !is_library_file(frame.file)) point.caller = call_site(frame);
  }
  return point;
}

WaitPoint process_wait_point(const model::ProcessDump& dump) {
  const auto has_python = [](const model::ThreadDump& t) { return !t.python_frames.empty(); };
  const bool any_python = std::any_of(dump.threads.begin(), dump.threads.end(), has_python);
  // Score: waiting on peers > on CPU > generic wait > nothing; then main thread, then GIL.
  const auto score = [&](const model::ThreadDump& thread, const WaitPoint& point) {
    int s = 0;
    if (waits_on_peers(point.kind)) {
      s = 40;
    } else if (thread.state == 'R') {
      s = 30;
    } else if (thread.state == 'D') {
      s = 25;
    } else if (point.kind != WaitKind::kOther) {
      s = 20;
    }
    if (thread.tid == dump.pid) s += 2;
    if (thread.holds_gil) s += 1;
    return s;
  };
  std::optional<WaitPoint> best;
  int best_score = -1;
  for (const auto& thread : dump.threads) {
    if (any_python && !has_python(thread)) continue;  // idle helper threads of the runtime
    WaitPoint point = classify_thread(thread);
    // Running: the state says so and the stack shows no wait. The state is read before the
    // thread is stopped and its stack copied; a thread that wakes often (a sleep(0.05) poll) is
    // read as R between two waits and then stopped inside the next one: its stack, the later
    // reading, says where it is.
    if (!waits_on_peers(point.kind) && thread.state == 'R' && point.primitive.empty()) {
      point.kind = WaitKind::kCpu;
      point.operation = "running";
    }
    if (point.kind == WaitKind::kOther && thread.state == 'D' && point.primitive.empty()) {
      point.primitive = thread.wchan.empty() ? "uninterruptible sleep" : thread.wchan;
      point.operation = "uninterruptible sleep";
    }
    const int s = score(thread, point);
    if (s > best_score) {
      best_score = s;
      best = std::move(point);
    }
  }
  return best.value_or(WaitPoint{});
}

}  // namespace hangscope::waits
