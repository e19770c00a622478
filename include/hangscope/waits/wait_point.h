// Where a rank waits: the innermost known waiting primitive on a merged stack (collective,
// store wait, rendezvous, channel, shared-memory ring, lock, sleep) with the Python call site
// that led there, and the choice of the thread that matters for the rank.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hangscope/model/process_dump.h"

namespace hangscope::waits {

enum class WaitKind {
  kCollective,  // torch.distributed collectives and barriers, gloo/NCCL waits
  kStore,       // c10d store waits (TCPStore wait/get)
  kRendezvous,  // symmetric-memory and other rendezvous
  kChannel,     // point-to-point: dist.send/recv, Ray channels, ray.get
  kRing,        // vLLM shared-memory broadcast ring (MessageQueue)
  kLock,        // locks, condition variables, events, joins, queues
  kSleep,       // sleep, poll, select, epoll
  kCpu,         // no waiting primitive: the thread works
  kOther,       // nothing known (no stack, or an unknown blocking call)
};

std::string_view to_string(WaitKind kind);

// True for the kinds that wait on other ranks of the job.
bool waits_on_peers(WaitKind kind);

// "…/site-packages/torch/distributed/distributed_c10d.py" →
// "torch/distributed/distributed_c10d.py"; elsewhere the last two path components.
std::string short_path(const std::string& file);

struct CallSite {
  std::string function;
  std::string qualname;
  std::string file;
  int line = 0;
  std::string text() const;  // "qualname (short/path.py:line)"
};

struct WaitPoint {
  WaitKind kind = WaitKind::kOther;
  std::string primitive;  // the frame that matched: "barrier", "c10d::TCPStore::doWait", …
  std::string operation;  // what it does: "barrier", "all_reduce", "recv", "store.wait", …
  std::optional<CallSite> python;  // innermost Python frame at or outside the primitive
  std::optional<CallSite> caller;  // innermost Python frame outside torch/ray/stdlib code
  pid_t tid = 0;                   // the thread it was read from
  // Locals of the primitive's Python frame and its callers (innermost first), when captured.
  std::vector<std::vector<std::pair<std::string, std::string>>> frame_locals;

  // Ranks at the same primitive and Python site are in the same operation.
  std::string operation_key() const;
  // The class key: operation, Python site and the caller that led there.
  std::string class_key() const;
  // One line for people: "barrier (torch/distributed/distributed_c10d.py:3145) <- main (x.py:9)".
  std::string describe() const;
  // What the waiting call was given, from the locals (for people): "group: the default group
  // (world); keys: 'weights/1/ready'", or "" when the locals say nothing.
  std::string arguments() const;
  // The value of a local of the primitive frame or its callers (innermost first).
  std::optional<std::string> local(std::string_view name) const;
};

// The wait point of one thread's merged stack; kOther with an empty primitive when nothing
// known matched (a thread that works shows kOther too: the caller decides kCpu from state).
WaitPoint classify_thread(const model::ThreadDump& thread);

// The wait point of a process: from the thread that waits or works on the rank's behalf
// (threads running Python first, the main thread among equals), not idle helper threads.
WaitPoint process_wait_point(const model::ProcessDump& dump);

}  // namespace hangscope::waits
