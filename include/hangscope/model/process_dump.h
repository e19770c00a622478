// The result of capturing one process: its threads, their state and their merged stacks.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hangscope/model/shared.h"
#include "hangscope/model/socket_state.h"

namespace hangscope::model {

struct Frame {
  enum class Kind { kNative, kPython };
  Kind kind = Kind::kNative;
  std::string function;  // demangled symbol / co_name; "" when unknown
  // native
  std::string module;  // path of the ELF file; "" when in no file mapping
  std::uint64_t address = 0;
  std::uint64_t offset = 0;  // from the function start, or from the module when unnamed
  std::uint64_t module_offset = 0;
  // python
  std::string qualname;
  std::string file;
  int line = 0;
  std::vector<std::pair<std::string, std::string>> locals;  // name, repr (--locals)

  bool operator==(const Frame&) const = default;
};

// A Python frame of asyncio's own code (a file under …/asyncio/): the function an asyncio task
// is parked in (Event.wait, Queue.get, sleep), which AsyncTask::awaits names.
bool in_asyncio(const Frame& frame);

// The frames of one stack view, innermost first. Copies share one immutable stack, so the
// thousands of threads of a large job that stand in the same stack hold it once; a stack is a
// list of frames held elsewhere, so a decoder that interns frames (snapshot::Interner) holds a
// frame that recurs 3,000 times in a deep stack, or in every stack of a job, once. Read like a
// vector of frames; `edit()` changes a copy of its own.
class FrameList {
 public:
  // The frames, and what keeps them alive (their own vector, or a decoder's frame pool).
  struct Stack {
    std::vector<const Frame*> frames;
    std::shared_ptr<const void> owner;
  };

  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = Frame;
    using difference_type = std::ptrdiff_t;
    using pointer = const Frame*;
    using reference = const Frame&;

    const_iterator() = default;
    explicit const_iterator(const Frame* const* at) : at_(at) {}
    reference operator*() const { return **at_; }
    pointer operator->() const { return *at_; }
    reference operator[](difference_type n) const { return *at_[n]; }
    const_iterator& operator++() { return ++at_, *this; }
    const_iterator operator++(int) { return const_iterator(at_++); }
    const_iterator& operator--() { return --at_, *this; }
    const_iterator operator--(int) { return const_iterator(at_--); }
    const_iterator& operator+=(difference_type n) { return at_ += n, *this; }
    const_iterator& operator-=(difference_type n) { return at_ -= n, *this; }
    friend const_iterator operator+(const_iterator i, difference_type n) { return i += n; }
    friend const_iterator operator+(difference_type n, const_iterator i) { return i += n; }
    friend const_iterator operator-(const_iterator i, difference_type n) { return i -= n; }
    friend difference_type operator-(const_iterator a, const_iterator b) { return a.at_ - b.at_; }
    friend bool operator==(const_iterator a, const_iterator b) { return a.at_ == b.at_; }
    friend auto operator<=>(const_iterator a, const_iterator b) { return a.at_ <=> b.at_; }

   private:
    const Frame* const* at_ = nullptr;
  };
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;
  using value_type = Frame;

  FrameList() = default;
  FrameList(std::vector<Frame> frames);  // NOLINT(google-explicit-constructor): a value type
  FrameList(std::initializer_list<Frame> frames) : FrameList(std::vector<Frame>(frames)) {}
  // A stack whose frames are held elsewhere (a decoder's interned ones).
  explicit FrameList(std::shared_ptr<const Stack> stack) : stack_(std::move(stack)) {}

  const_iterator begin() const { return const_iterator(data()); }
  const_iterator end() const { return const_iterator(data() + size()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }
  std::size_t size() const { return stack_ ? stack_->frames.size() : 0; }
  bool empty() const { return size() == 0; }
  const Frame& operator[](std::size_t i) const { return *stack_->frames[i]; }
  const Frame& front() const { return *stack_->frames.front(); }
  const Frame& back() const { return *stack_->frames.back(); }

  // The frames as a vector of their own (a copy).
  std::vector<Frame> to_vector() const { return {begin(), end()}; }
  // Changes this list (only): `change` gets a copy of the frames, which the list holds after.
  template <typename Change>
  void edit(Change&& change) {
    auto frames = to_vector();
    change(frames);
    *this = FrameList(std::move(frames));
  }
  void push_back(Frame frame);

  // Whether the two hold one stack (not merely equal frames).
  bool shares(const FrameList& other) const { return stack_ != nullptr && stack_ == other.stack_; }
  const std::shared_ptr<const Stack>& stack() const { return stack_; }

  bool operator==(const FrameList& other) const;

 private:
  const Frame* const* data() const { return stack_ ? stack_->frames.data() : nullptr; }
  std::shared_ptr<const Stack> stack_;  // null: no frames
};

// ThreadDump::merge of a thread whose native and Python stacks were merged (or that has only
// one of them); anything else says why they were not ("failed: …").
inline constexpr char kMergeOk[] = "ok";

// What the non-stopping probes between the previous sample and this one saw of a thread
// (docs/analysis.md, "Progress evidence"): each probe read the thread's Python stack while it
// ran and counted how many of the previous sample's frames, from the outermost in, it still
// stood in (the same functions, called at the same lines, the innermost of them at any line).
// A thread that waits in the frame at depth D (0: the outermost) was seen outside that wait
// by every probe that kept D frames or fewer.
struct ProbeTally {
  std::uint32_t taken = 0;  // probes that read the thread's stack whole (torn reads not counted)
  // (frames kept, probes that kept that many), by frames kept, ascending
  std::vector<std::pair<std::uint32_t, std::uint32_t>> kept;

  // The probes that found the thread outside the frame at `depth` (0: outermost).
  std::uint32_t outside(std::size_t depth) const;
  void count(std::uint32_t frames_kept);
  bool operator==(const ProbeTally&) const = default;
};

struct ThreadDump {
  pid_t tid = 0;
  std::string name;  // comm
  char state = '?';  // before hangscope stopped it
  std::string wchan;
  std::vector<std::string> kernel_stack;  // for threads that could not be stopped (state D)
  std::optional<std::uint64_t> py_thread_id;
  std::optional<std::string> py_thread_name;
  bool holds_gil = false;
  std::string merge = kMergeOk;
  FrameList frames;                // merged view, innermost first
  FrameList native_frames;         // raw native stack (kept for snapshots)
  FrameList python_frames;         // raw Python stack (kept for snapshots)
  std::vector<std::string> notes;  // what went wrong for this thread
  std::chrono::nanoseconds paused{0};
  std::uint64_t utime_ticks = 0;  // CPU time of this thread (clock ticks), read before stopping
  std::uint64_t stime_ticks = 0;
  std::uint64_t context_switches = 0;  // voluntary + involuntary, read before stopping
  // Probes since the previous sample (sample series only; nullopt when none read the thread).
  std::optional<ProbeTally> probes;
};

// One torch.distributed process group as a rank holds it (read from its memory).
struct ProcessGroupState {
  std::string name;     // torch's group name: "0" is the default group in 1.13
  std::string backend;  // "gloo", "nccl", … ("" when unknown)
  // Global ranks in group-rank order; empty when they are simply 0..size-1 (a decoded default
  // group: not sent, since at 30,000 ranks every rank would carry the whole list).
  std::vector<int> ranks;
  int size = 0;                           // members
  std::optional<int> group_rank;          // this process's rank in the group (the C++ ProcessGroup)
  std::optional<std::uint64_t> sequence;  // collectives issued on it (C++ sequence number)
  // Its collective timeout (the C++ backend's options: init_process_group's or new_group's
  // `timeout`), when read.
  std::optional<std::int64_t> timeout_ms;
  bool is_default = false;          // the default (world) group
  std::vector<std::string> labels;  // what wrappers call it: "vllm:tp", "megatron:pp", …
  std::uint64_t address = 0;        // the Python object (local to the capture; not sent)
  // Groups outside torch's registry (docs/analysis.md, "Groups outside the registry"): false
  // for a group found only as a frame's local or an object's attribute (vLLM's stateless DP
  // group, its StatelessProcessGroup, a group only user code holds).
  bool registered = true;
  std::string type;     // its Python type when found outside the registry: "ProcessGroupGloo", …
  std::string held_by;  // where it was found then: a local ("dp_group"), an attribute ("self.pg")
  // The c10d TCPStore it was made on, as this process holds it ("host:port", the host as given,
  // maybe a name), and the PrefixStore prefixes in between, outermost first: with the store's
  // resolved address, what identifies the group across processes (model::group_store_key).
  std::string store;
  std::vector<std::string> store_prefixes;
  // vLLM's StatelessProcessGroup: its program order, the objects it exchanged so far per peer
  // ("broadcast_send", "broadcast_recv_src/2", "send_dst/1", "recv_src/0").
  std::map<std::string, std::int64_t> counters;

  bool operator==(const ProcessGroupState&) const = default;
};

// torch.distributed's state in one process: its rank, world size and groups, and how each
// was read (docs/analysis.md, "Membership").
struct DistributedState {
  std::optional<int> rank;  // global rank
  std::optional<int> world_size;
  std::string init_method;                 // "tcp://host:port", "env://" ("" when unknown)
  std::string registry;                    // "torch-1.13" (GroupMember.WORLD) | "torch-2" (_world)
  std::map<std::string, int> coordinates;  // "tp" → rank in the TP group (wrappers' groups)
  std::vector<ProcessGroupState> groups;
  std::vector<std::string> notes;  // what could not be read, and why

  // True once torch.distributed was imported and a default group exists (groups found only
  // outside the registry do not count).
  bool initialized() const;
  const ProcessGroupState* find(std::string_view name) const;
  const ProcessGroupState* default_group() const;
  bool operator==(const DistributedState&) const = default;
};

// One asyncio Task of the process, read from its memory (docs/python-capture.md, "asyncio
// tasks"): what it is suspended in and what it awaits.
struct AsyncTask {
  enum class State { kPending, kCancelled, kFinished };
  std::uint64_t address = 0;  // the Task object: what other tasks' `awaited_task` name
  std::uint64_t loop = 0;     // its event loop object (0 when unreadable)
  std::optional<pid_t> tid;   // the thread running that loop, when known
  std::string name;           // as asyncio prints it: "Task-7" or the name it was given
  State state = State::kPending;
  bool eager = false;    // started eagerly (3.12+ eager task factory)
  bool running = false;  // its coroutine was executing when sampled (not suspended)
  // The coroutine chain it is suspended in, innermost first (Frame::Kind::kPython frames:
  // function, qualname, file, line), followed through cr_await / gi_yieldfrom.
  FrameList coroutine;
  std::optional<std::uint64_t> awaited_task;  // the Task it awaits, when it awaits a Task
  // What it awaits when that is no Task: "Future", "_GatheringFuture", "Event.wait", … ("" when
  // nothing or unknown).
  std::string awaits;
  std::vector<std::string> notes;  // what could not be read
};

// One socket the process holds open (docs/cli.md, "sockets"), described from outside: enough to
// pair it with the other end held by another process (a unix peer's inode, a TCP connection's
// two addresses), which is how the serving chain links an API server to its engine cores.
struct Socket {
  enum class Family { kUnix, kTcp };  // kTcp: IPv4 and IPv6
  Family family = Family::kUnix;
  int fd = -1;                                // the first descriptor that holds it
  std::uint64_t inode = 0;                    // socket:[INODE]
  std::string type;                           // "stream" | "dgram" | "seqpacket"
  SocketState state = SocketState::kUnknown;  // its name: state_name()
  // unix: the bound name (an accepted socket carries its listener's): a path, or "@name" for an
  // abstract name (its NUL bytes as '@', as ss prints them); "" when unnamed.
  std::string path;
  std::uint64_t peer_inode = 0;  // unix: the other end's inode (0: none, or unknown)
  std::string local, remote;     // tcp: "10.0.0.1:5555", "[::1]:80"
  // tcp: bytes not yet acknowledged by the peer, bytes not yet read by the process, and the
  // unrecovered retransmission timeouts (a link that lost its traffic keeps them growing).
  std::uint32_t tx_queue = 0;
  std::uint32_t rx_queue = 0;
  std::uint32_t retransmits = 0;

  bool operator==(const Socket&) const = default;
  // The state's name for the family: unix "listen" | "connected" | "unconnected"; tcp
  // "established", "listen", "syn-sent", …
  std::string_view state_name() const;
};

struct ProcessDump {
  pid_t pid = 0;
  std::string command;                // comm of the process
  std::optional<std::string> python;  // interpreter version
  std::vector<std::string> notes;     // process-wide notes (unreadable files, ...)
  std::vector<ThreadDump> threads;
  std::chrono::nanoseconds capture_time{0};
  std::chrono::nanoseconds max_paused{0};
  // torch.distributed as the process holds it; nullopt when torch.distributed was never
  // imported (or the process is not Python).
  std::optional<DistributedState> distributed;
  // asyncio tasks of every event loop (hangscope dump --tasks; captured by agents); empty when
  // asyncio was never imported or tasks were not asked for.
  std::vector<AsyncTask> tasks;
  // The unix and TCP sockets it holds (live captures; at most capture::kMaxSockets, a note when
  // more). Shared by the copies of a decoded snapshot that hold the same ones.
  Shared<std::vector<Socket>> sockets;
};

// How a local that is a known process group shows in a frame's locals: "<process group NAME>".
std::string group_label(std::string_view name);
// The group name in such a label; nullopt for any other text.
std::optional<std::string> group_in_label(std::string_view text);

// Human words for a state letter ("sleeping", "uninterruptible (disk) sleep", ...).
std::string_view describe_state(char state);

}  // namespace hangscope::model
