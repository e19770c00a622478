// Walks the interpreter's thread states and frames in another process's memory: one algorithm
// for every supported version, driven by the version's Layout.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hangscope/common/diagnostic.h"
#include "hangscope/python/objects.h"

namespace hangscope::python {

struct PyFrame {
  std::string function;  // co_name
  std::string qualname;  // co_qualname (3.11+), else co_name
  std::string file;      // co_filename
  int line = 0;          // 0 when the instruction has no line
  // The outermost Python frame run by one native _PyEval_EvalFrameDefault call.
  bool eval_entry = false;
  std::vector<std::pair<std::string, std::string>> locals;  // name, repr (with --locals)
};

struct PyThread {
  std::uint64_t tstate = 0;
  std::uint64_t thread_id = 0;                   // pthread_t
  std::optional<std::int64_t> native_thread_id;  // gettid() in the target's PID namespace (3.11+)
  std::optional<std::string> name;  // threading.Thread.name, when threading knows the thread
  bool holds_gil = false;
  std::vector<PyFrame> frames;       // innermost first
  WalkEnd end = WalkEnd::kComplete;  // why the walk of its frames ended
  // What went wrong, for people (its text) and callers (its code): the walk's early end
  // (kStackCut at the frame limit, kStackBroken otherwise), else the first frame whose code
  // object could not be read (kDamagedFrame). nullopt when every frame down to the bottom was read.
  std::optional<Diagnostic> error;
};

// True when a read caught the thread's frames mid-change (or damaged): the walk ended early on
// an unreadable frame or a loop, or a code object could not be read. A stack cut at the frame
// limit is sound, not torn. Readers of a running process read such a thread again.
bool torn(const PyThread& thread);

// Sees every local's object before it is shown (with --locals), so a reader of objects can
// recognise some (process groups) and give them a label that repr() then shows.
class LocalsObserver {
 public:
  virtual ~LocalsObserver() = default;
  virtual void local(std::string_view name, std::uint64_t object, ObjectReader& objects) = 0;
};

// Code objects decoded by earlier reads of one process (a capture session's): each use checks the
// code object's name, file, line table and first line against what was decoded, so an address a
// freed code object left to another one is decoded anew. Repeated reads of a running process
// (watch's observations, probes) then cost frame reads, not string and table decoding.
struct CodeCacheEntry {
  std::uint64_t name = 0, file = 0, line_table = 0;  // the header's pointers when decoded
  int first_line = 0;
  bool with_locals = false;    // the local names were decoded too
  std::shared_ptr<void> info;  // StackReader's decoded form
};
using CodeCache = std::map<std::uint64_t, CodeCacheEntry>;

struct StackReaderOptions {
  bool locals = false;
  // Shared across reads of the same process (optional; must outlive the reader).
  CodeCache* codes = nullptr;
  // threading's thread names (a dict walk per read); watch's probes do without.
  bool thread_names = true;
  LocalsObserver* observer = nullptr;  // with locals: told of each local first
  std::size_t max_frames = 4096;
  std::size_t max_threads = 4096;
};

class StackReader {
 public:
  StackReader(ObjectReader& objects, std::uint64_t runtime_address, StackReaderOptions options)
      : objects_(objects),
        layout_(objects.layout()),
        runtime_(runtime_address),
        options_(options) {}

  // Every thread of the main interpreter. Throws hangscope::Error when the interpreter itself
  // cannot be reached (not initialised yet, finalising, or memory that does not fit the layout).
  std::vector<PyThread> read_threads();

  // One frame that is on no thread's stack (a suspended coroutine's): its code and line, no
  // locals. nullopt when the frame or its code object cannot be read.
  std::optional<PyFrame> read_frame(std::uint64_t frame_address);

 private:
  struct CodeInfo {
    bool valid = false;
    std::string name, qualname, file;
    int first_line = 0;
    std::string line_table;
    int first_traceable = 0;
    std::vector<std::string> local_names;
    std::string local_kinds;
  };

  const CodeInfo& code_info(std::uint64_t code);
  std::optional<std::uint64_t> gil_holder(std::uint64_t interp);
  // threading._active: thread ident -> Thread.name.
  std::map<std::uint64_t, std::string> thread_names(std::uint64_t interp);
  std::optional<std::uint64_t> first_frame(std::uint64_t tstate);
  void walk_frames(std::uint64_t frame, PyThread& thread);
  void read_locals(const CodeInfo& code, std::uint64_t frame_address, PyFrame& frame);
  int line_of(const CodeInfo& code, std::uint64_t code_address, std::uint64_t instr) const;

  ObjectReader& objects_;
  const Layout& layout_;
  std::uint64_t runtime_;
  StackReaderOptions options_;
  std::map<std::uint64_t, CodeInfo> codes_;
};

}  // namespace hangscope::python
