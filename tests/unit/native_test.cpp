// The native area without a target to capture: registers as a core's NT_PRSTATUS holds them,
// this thread's own stack unwound and symbolized from a copy (as freeze_and_copy would have
// taken it), names of exact and return addresses, a ptrace stop of a forked child and its
// release, and the held window: job-control stops wait until it closes, and the watchdog kills
// a process SIGSTOPped inside one (and only inside one).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <libunwind.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hangscope/elf/process_image.h"
#include "hangscope/memory/process_memory.h"
#include "hangscope/native/held_window.h"
#include "hangscope/native/registers.h"
#include "hangscope/native/symbolizer.h"
#include "hangscope/native/thread_stop.h"
#include "hangscope/native/unwinder.h"
#include "hangscope/proc/maps.h"
#include "hangscope/proc/process_fs.h"
#include "hangscope/proc/task_stat.h"
#include "target_process.h"

// Functions whose frames the tests look for: C names (no demangling to match), never inlined,
// and never cloned by GCC into `name.constprop.0` / `name.isra.0` (noipa; clang clones none).
#if defined(__clang__)
#define HANGSCOPE_TEST_FRAME [[gnu::noinline]]
#else
#define HANGSCOPE_TEST_FRAME [[gnu::noipa]]
#endif

extern "C" {
HANGSCOPE_TEST_FRAME void hangscope_native_test_copy_stack(hangscope::native::ThreadCopy* out);
HANGSCOPE_TEST_FRAME void hangscope_native_test_outer(hangscope::native::ThreadCopy* out);
HANGSCOPE_TEST_FRAME std::uint64_t hangscope_native_test_return_address();
HANGSCOPE_TEST_FRAME std::uint64_t hangscope_native_test_caller();
}

namespace hangscope::native {
namespace {

using namespace std::chrono_literals;

// ----- registers -----

// A core's NT_PRSTATUS is the kernel's user_regs_struct: each register lands in the slot of
// libunwind's number for it, and the thread pointer is fs_base.
TEST(Registers, CoreWordsLandInLibunwindsNumbering) {
  user_regs_struct regs{};
  regs.rax = 0x1010;
  regs.rdx = 0x1020;
  regs.rcx = 0x1030;
  regs.rbx = 0x1040;
  regs.rsi = 0x1050;
  regs.rdi = 0x1060;
  regs.rbp = 0x1070;
  regs.rsp = 0x7ffd0000;
  regs.r8 = 0x1080;
  regs.r9 = 0x1090;
  regs.r10 = 0x10a0;
  regs.r11 = 0x10b0;
  regs.r12 = 0x10c0;
  regs.r13 = 0x10d0;
  regs.r14 = 0x10e0;
  regs.r15 = 0x10f0;
  regs.rip = 0x401000;
  regs.orig_rax = 0xdead;  // not a register libunwind reads
  regs.eflags = 0x246;
  regs.fs_base = 0x7f0000001000;
  std::array<std::uint64_t, 27> words{};
  static_assert(sizeof regs == sizeof words);
  std::memcpy(words.data(), &regs, sizeof regs);
  const RegisterSet set = registers_from_words(words);

  EXPECT_EQ(set.instruction_pointer(), 0x401000u);
  EXPECT_EQ(set.stack_pointer(), 0x7ffd0000u);
  EXPECT_EQ(set.thread_pointer(), 0x7f0000001000u);
  const std::vector<std::pair<int, std::uint64_t>> by_number = {
      {UNW_X86_64_RAX, 0x1010}, {UNW_X86_64_RDX, 0x1020},     {UNW_X86_64_RCX, 0x1030},
      {UNW_X86_64_RBX, 0x1040}, {UNW_X86_64_RSI, 0x1050},     {UNW_X86_64_RDI, 0x1060},
      {UNW_X86_64_RBP, 0x1070}, {UNW_X86_64_RSP, 0x7ffd0000}, {UNW_X86_64_R8, 0x1080},
      {UNW_X86_64_R9, 0x1090},  {UNW_X86_64_R10, 0x10a0},     {UNW_X86_64_R11, 0x10b0},
      {UNW_X86_64_R12, 0x10c0}, {UNW_X86_64_R13, 0x10d0},     {UNW_X86_64_R14, 0x10e0},
      {UNW_X86_64_R15, 0x10f0}, {UNW_X86_64_RIP, 0x401000}};
  for (const auto& [number, value] : by_number) {
    EXPECT_EQ(set.by_unwind_number(number), value) << "libunwind register " << number;
  }
  EXPECT_EQ(set.by_unwind_number(-1), std::nullopt);
  EXPECT_EQ(set.by_unwind_number(RegisterSet::kCount), std::nullopt);
}

// ----- this thread's stack, copied, unwound and symbolized -----

// The mapping that holds `address` in this process.
std::optional<proc::Mapping> own_mapping(std::uint64_t address) {
  int error = 0;
  const auto maps = proc::read_memory_map(::getpid(), &error);
  if (!maps) return std::nullopt;
  for (const auto& m : maps->mappings()) {
    if (m.contains(address)) return m;
  }
  return std::nullopt;
}

}  // namespace
}  // namespace hangscope::native

// This thread as freeze_and_copy copies a stopped one: the registers (getcontext: the pc is
// inside this function) and the stack from the red zone below the stack pointer to the end of
// its mapping, read through process_vm_readv (a plain copy of one's own stack trips ASan's
// redzones).
extern "C" void hangscope_native_test_copy_stack(hangscope::native::ThreadCopy* out) {
  using namespace hangscope;
  ucontext_t context{};
  ::getcontext(&context);
  const auto* g = context.uc_mcontext.gregs;
  user_regs_struct regs{};
  regs.rip = static_cast<std::uint64_t>(g[REG_RIP]);
  regs.rsp = static_cast<std::uint64_t>(g[REG_RSP]);
  regs.rbp = static_cast<std::uint64_t>(g[REG_RBP]);
  regs.rbx = static_cast<std::uint64_t>(g[REG_RBX]);
  regs.r12 = static_cast<std::uint64_t>(g[REG_R12]);
  regs.r13 = static_cast<std::uint64_t>(g[REG_R13]);
  regs.r14 = static_cast<std::uint64_t>(g[REG_R14]);
  regs.r15 = static_cast<std::uint64_t>(g[REG_R15]);
  std::array<std::uint64_t, 27> words{};
  std::memcpy(words.data(), &regs, sizeof regs);
  out->tid = ::gettid();
  out->registers = native::registers_from_words(words);
  const std::uint64_t from = regs.rsp - native::RegisterSet::kRedZone;
  const auto stack = native::own_mapping(regs.rsp);
  if (!stack) return;
  const std::uint64_t to = std::min<std::uint64_t>(stack->end, from + 512 * 1024);
  out->stack.resize(to - from);
  memory::ProcessMemory self(::getpid());
  out->stack.resize(self.read(from, out->stack.data(), out->stack.size()));
  out->stack_start = from;
  out->copied = !out->stack.empty();
}

extern "C" void hangscope_native_test_outer(hangscope::native::ThreadCopy* out) {
  hangscope_native_test_copy_stack(out);
  asm volatile("" ::: "memory");  // not a tail call: this frame stays on the stack
}

// The return address into hangscope_native_test_caller.
extern "C" std::uint64_t hangscope_native_test_return_address() {
  return reinterpret_cast<std::uint64_t>(__builtin_return_address(0));
}

extern "C" std::uint64_t hangscope_native_test_caller() {
  const std::uint64_t address = hangscope_native_test_return_address();
  asm volatile("" ::: "memory");
  return address;
}

namespace hangscope::native {
namespace {

std::uint64_t address_of(void (*function)(ThreadCopy*)) {
  return reinterpret_cast<std::uint64_t>(function);
}

struct OwnImage {
  std::optional<elf::ProcessImage> image;
  OwnImage() {
    int error = 0;
    auto maps = proc::read_memory_map(::getpid(), &error);
    if (maps) image.emplace(proc::ProcessFs(::getpid()), std::move(*maps));
  }
};

std::vector<std::string> names_of(const std::vector<model::Frame>& frames) {
  std::vector<std::string> names;
  for (const auto& f : frames) names.push_back(f.function);
  return names;
}

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += "  " + (n.empty() ? "??" : n) + "\n";
  return out;
}

std::ptrdiff_t position(const std::vector<std::string>& names, const std::string& name) {
  const auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : it - names.begin();
}

// The copy unwinds through this test, GoogleTest and libc to main, innermost first, each frame
// named from the binary's own symbols. As after a capture's release, words that are neither in
// the copy nor in a read-only mapping of a file are read from the live process (here: the C++
// personality pointers the unwind tables refer to, in the binary's relocated data).
TEST(Unwinder, ACopyOfThisThreadUnwindsToMainWithEveryFrameInOrder) {
  ThreadCopy copy;
  hangscope_native_test_outer(&copy);
  ASSERT_TRUE(copy.copied);
  OwnImage own;
  ASSERT_TRUE(own.image);
  memory::ProcessMemory self(::getpid());
  const auto walk = Unwinder(*own.image, &self).unwind(copy);
  const auto names = names_of(Symbolizer(*own.image).symbolize(walk.frames));
  ASSERT_GE(names.size(), 4u) << walk.stop_reason;
  EXPECT_EQ(names[0], "hangscope_native_test_copy_stack") << listed(names);
  EXPECT_EQ(names[1], "hangscope_native_test_outer") << listed(names);
  const auto main_at = position(names, "main");
  EXPECT_GT(main_at, 1) << listed(names);
  // This test's own body lies between them.
  const auto body = std::find_if(names.begin(), names.end(), [](const std::string& n) {
    return n.find("ACopyOfThisThreadUnwindsToMainWithEveryFrameInOrder") != std::string::npos;
  });
  ASSERT_NE(body, names.end()) << listed(names);
  EXPECT_LT(body - names.begin(), main_at) << listed(names);
  EXPECT_EQ(walk.end, WalkEnd::kComplete) << walk.stop_reason;
  EXPECT_EQ(walk.stop_reason, "");
}

TEST(Unwinder, TheFrameLimitEndsTheWalkAndSaysSo) {
  ThreadCopy copy;
  hangscope_native_test_outer(&copy);
  ASSERT_TRUE(copy.copied);
  OwnImage own;
  ASSERT_TRUE(own.image);
  memory::ProcessMemory self(::getpid());
  const auto walk = Unwinder(*own.image, &self).unwind(copy, 2);
  EXPECT_EQ(walk.frames.size(), 2u);
  EXPECT_EQ(walk.end, WalkEnd::kFrameLimit);
  EXPECT_EQ(walk.stop_reason, "stopped after 2 frames");
}

// The process as it was when the copy was taken: its stack from a full copy (this thread's
// real stack has moved on since), anything else read now.
class AsCopied final : public memory::MemoryReader {
 public:
  explicit AsCopied(const ThreadCopy& full)
      : stack_(full.stack_start, full.stack.data(), full.stack.size()) {}
  std::size_t read(std::uint64_t address, void* out, std::size_t size) override {
    if (stack_.contains(address, size)) return stack_.read(address, out, size);
    return now_.read(address, out, size);
  }

 private:
  memory::BufferMemory stack_;
  memory::ProcessMemory now_{::getpid()};
};

// A stack copy cut short (the --max-stack-kib cap) still unwinds whole when the process can
// serve the rest, and the walk counts those reads; with nothing to read from (no live process)
// the walk ends at the first word it lacks, as unreadable memory, never as complete. (Even a
// whole copy lacks words: the C++ personality pointers the unwind tables refer to lie in the
// binary's relocated, writable data, which no file mapping serves.)
TEST(Unwinder, WordsOutsideTheCopyAreReadLiveOrEndTheWalkAsUnreadable) {
  ThreadCopy copy;
  hangscope_native_test_outer(&copy);
  ASSERT_TRUE(copy.copied);
  OwnImage own;
  ASSERT_TRUE(own.image);
  AsCopied process(copy);
  const auto whole = Unwinder(*own.image, &process).unwind(copy);
  ASSERT_EQ(whole.end, WalkEnd::kComplete) << whole.stop_reason;
  EXPECT_GT(whole.live_reads, 0u);

  ThreadCopy cut = copy;
  cut.stack.resize(std::min<std::size_t>(cut.stack.size(), RegisterSet::kRedZone + 64));
  const auto cut_walk = Unwinder(*own.image, &process).unwind(cut);
  EXPECT_EQ(names_of(Symbolizer(*own.image).symbolize(cut_walk.frames)),
            names_of(Symbolizer(*own.image).symbolize(whole.frames)));
  EXPECT_EQ(cut_walk.end, WalkEnd::kComplete) << cut_walk.stop_reason;
  EXPECT_GT(cut_walk.live_reads, whole.live_reads);

  for (const ThreadCopy* alone : {&copy, &cut}) {
    const auto walk = Unwinder(*own.image, nullptr).unwind(*alone);
    EXPECT_LT(walk.frames.size(), whole.frames.size());
    EXPECT_EQ(walk.end, WalkEnd::kUnreadableMemory) << walk.stop_reason;
    EXPECT_NE(walk.stop_reason, "");
    EXPECT_EQ(walk.live_reads, 0u);
  }
}

// ----- naming addresses -----

// The innermost pc is exact; an outer frame's pc is a return address, named one byte earlier
// (the call before it), unless the frame inside it was a signal frame.
TEST(Symbolizer, ExactAndReturnAddressesAreNamedApart) {
  OwnImage own;
  ASSERT_TRUE(own.image);
  Symbolizer symbolizer(*own.image);
  const std::uint64_t start = address_of(&hangscope_native_test_outer);
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();

  const auto inner = symbolizer.symbolize({{start + 2, false}});
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(inner[0].function, "hangscope_native_test_outer");
  EXPECT_EQ(inner[0].offset, 2u);
  EXPECT_EQ(inner[0].module, exe);
  EXPECT_EQ(inner[0].address, start + 2);

  // A return address at a function's first byte belongs to the call just before it.
  const auto returned = symbolizer.symbolize({{start + 2, false}, {start, false}});
  EXPECT_NE(returned[1].function, "hangscope_native_test_outer");
  // Above a signal frame the pc was interrupted, not returned to: exact.
  const auto interrupted = symbolizer.symbolize({{start + 2, true}, {start, false}});
  EXPECT_EQ(interrupted[1].function, "hangscope_native_test_outer");
  EXPECT_EQ(interrupted[1].offset, 0u);

  // A real return address names its caller.
  const std::uint64_t back = hangscope_native_test_caller();
  const auto call = symbolizer.symbolize({{start, false}, {back, false}});
  EXPECT_EQ(call[1].function, "hangscope_native_test_caller");

  // An address in no mapping: no name, no module, only the address.
  const auto nowhere = symbolizer.symbolize({{0x10, false}});
  EXPECT_EQ(nowhere[0].function, "");
  EXPECT_EQ(nowhere[0].module, "");
  EXPECT_EQ(nowhere[0].address, 0x10u);
}

// ----- forked children -----

// A child of this test that dies with it and is always killed and reaped.
class Child {
 public:
  explicit Child(const std::function<void()>& body) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      body();
      ::_exit(0);
    }
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // The next status change (exit, signal, or with `stops` a stop) within `timeout`.
  std::optional<int> wait_status(std::chrono::milliseconds timeout, bool stops = false) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG | (stops ? WUNTRACED : 0));
      if (r == pid_) {
        reaped_ = WIFEXITED(status) || WIFSIGNALED(status);
        return status;
      }
      if (std::chrono::steady_clock::now() >= until) return std::nullopt;
      std::this_thread::sleep_for(5ms);
    }
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// A pipe whose ends are closed with it.
struct Pipe {
  int read_end = -1, write_end = -1;
  Pipe() {
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) == 0) {
      read_end = ends[0];
      write_end = ends[1];
    }
  }
  ~Pipe() {
    close_read();
    close_write();
  }
  void close_read() {
    if (read_end >= 0) ::close(read_end);
    read_end = -1;
  }
  void close_write() {
    if (write_end >= 0) ::close(write_end);
    write_end = -1;
  }
  void put(const void* bytes, std::size_t n) const {
    [[maybe_unused]] const auto w = ::write(write_end, bytes, n);
  }
  // Up to `n` bytes within `timeout`; fewer on EOF or timeout.
  std::string take(std::size_t n, std::chrono::milliseconds timeout) const {
    std::string out;
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (out.size() < n) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{read_end, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buffer[256];
      const ssize_t got = ::read(read_end, buffer, std::min(sizeof buffer, n - out.size()));
      if (got <= 0) break;
      out.append(buffer, static_cast<std::size_t>(got));
    }
    return out;
  }
};

char state_of(pid_t pid) {
  const auto stat = proc::ProcessFs(pid).task_stat(pid);
  return stat ? stat->state : '?';
}

// PTRACE_SEIZE + INTERRUPT stops a busy child where it runs: its counter stands still, its
// registers are read, its stack pointer lies in its stack; release lets it count again.
TEST(ThreadStop, StopsABusyChildReadsItsRegistersAndReleasesIt) {
  auto* counter = static_cast<std::atomic<std::uint64_t>*>(
      ::mmap(nullptr, sizeof(std::atomic<std::uint64_t>), PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(counter, MAP_FAILED);
  new (counter) std::atomic<std::uint64_t>(0);
  Child child([counter] {
    for (;;) counter->fetch_add(1, std::memory_order_relaxed);
  });
  ASSERT_TRUE(testing::eventually([&] { return counter->load() > 0; }));

  ThreadStop stop(child.pid());
  ASSERT_EQ(stop.seize_and_interrupt(), 0) << std::strerror(errno);
  ASSERT_EQ(stop.wait(5s), StopState::kStopped);
  const auto held = counter->load();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(counter->load(), held);  // stopped means stopped
  RegisterSet registers;
  ASSERT_EQ(read_registers(child.pid(), registers), 0);
  int error = 0;
  const auto maps = proc::read_memory_map(child.pid(), &error);
  ASSERT_TRUE(maps);
  const auto* stack = maps->find(registers.stack_pointer());
  ASSERT_NE(stack, nullptr);
  EXPECT_EQ(stack->path, "[stack]");
  const auto* code = maps->find(registers.instruction_pointer());
  ASSERT_NE(code, nullptr);
  EXPECT_TRUE(code->executable);

  stop.release();
  EXPECT_EQ(stop.state(), StopState::kReleased);
  EXPECT_GT(stop.paused_for(), 0ns);
  EXPECT_TRUE(testing::eventually([&] { return counter->load() > held; }));
  EXPECT_NE(state_of(child.pid()), 't');
  ::munmap(counter, sizeof(std::atomic<std::uint64_t>));
}

TEST(ThreadStop, AThreadThatIsGoneIsRefusedAndNothingIsHeld) {
  pid_t gone = 0;
  {
    Child child([] {});
    ASSERT_TRUE(child.wait_status(10s).has_value());
    gone = child.pid();
  }
  ThreadStop stop(gone);
  EXPECT_EQ(stop.seize_and_interrupt(), ESRCH);
  EXPECT_EQ(stop.state(), StopState::kNotSeized);
  stop.release();
  EXPECT_EQ(stop.state(), StopState::kNotSeized);
  EXPECT_EQ(stop.paused_for(), 0ns);
}

// Ctrl-Z (SIGTSTP) inside a held window does not stop the process: it is held back until the
// window closes, then the process stops as asked, with nothing held.
TEST(HeldWindow, AJobControlStopWaitsUntilTheWindowCloses) {
  Pipe to_parent, to_child;
  Child child([&] {
    ::setpgid(0, 0);  // its own process group, not orphaned: SIGTSTP is not discarded
    {
      HeldWindow window;
      ::raise(SIGTSTP);
      to_parent.put("a", 1);  // still running inside the window
      char go = 0;
      [[maybe_unused]] const auto r = ::read(to_child.read_end, &go, 1);
    }  // closes: the held-back SIGTSTP stops the process here
    to_parent.put("c", 1);
  });
  to_parent.close_write();
  ASSERT_EQ(to_parent.take(1, 20s), "a") << "SIGTSTP stopped the process inside the window";
  EXPECT_FALSE(child.wait_status(0ms, true).has_value());  // neither stopped nor gone
  EXPECT_NE(state_of(child.pid()), 'T');
  to_child.put("g", 1);
  const auto stopped = child.wait_status(20s, true);
  ASSERT_TRUE(stopped.has_value()) << "the held-back SIGTSTP never stopped the process";
  ASSERT_TRUE(WIFSTOPPED(*stopped));
  EXPECT_EQ(WSTOPSIG(*stopped), SIGTSTP);
  ::kill(child.pid(), SIGCONT);
  EXPECT_EQ(to_parent.take(1, 20s), "c");
  const auto exited = child.wait_status(20s);
  ASSERT_TRUE(exited.has_value());
  EXPECT_TRUE(WIFEXITED(*exited) && WEXITSTATUS(*exited) == 0);
}

// SIGSTOP cannot be held back: a process stopped inside a held window for longer than
// kStoppedTracerBound is killed by its watchdog (the kernel then releases every tracee), and
// the watchdog says so on stderr. The watchdog is a process of its own session, named
// hangscope-watch, so a terminal's Ctrl-Z and Ctrl-C never reach it.
TEST(HeldWindow, AProcessStoppedInsideAWindowIsKilledByItsWatchdog) {
  Pipe to_parent, stderr_pipe;
  Child child([&] {
    ::setpgid(0, 0);
    ::dup2(stderr_pipe.write_end, STDERR_FILENO);
    HeldWindow window;
    const pid_t watchdog = stop_watchdog_pid();
    to_parent.put(&watchdog, sizeof watchdog);
    for (;;) ::pause();
  });
  to_parent.close_write();
  stderr_pipe.close_write();
  const std::string got = to_parent.take(sizeof(pid_t), 20s);
  ASSERT_EQ(got.size(), sizeof(pid_t));
  pid_t watchdog = 0;
  std::memcpy(&watchdog, got.data(), sizeof watchdog);
  ASSERT_GT(watchdog, 0);
  // The watchdog names itself once forked: wait for it.
  EXPECT_TRUE(testing::eventually([&] {
    const auto stat = proc::ProcessFs(watchdog).task_stat(watchdog);
    return stat && stat->comm == "hangscope-watch";
  }));
  EXPECT_NE(::getsid(watchdog), ::getsid(child.pid()));

  const auto stopped_at = std::chrono::steady_clock::now();
  ::kill(child.pid(), SIGSTOP);
  const auto status = child.wait_status(30s);
  ASSERT_TRUE(status.has_value()) << "the watchdog did not kill the stopped process";
  const auto took = std::chrono::steady_clock::now() - stopped_at;
  ASSERT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGKILL);
  EXPECT_GE(took, kStoppedTracerBound);  // never before the bound
  const std::string said = stderr_pipe.take(4096, 10s);
  EXPECT_NE(said.find("hangscope: watchdog: hangscope (pid " + std::to_string(child.pid()) +
                      ") was stopped for "),
            std::string::npos)
      << said;
}

// Outside every window a stop is the user's business: the watchdog leaves it alone.
TEST(HeldWindow, AProcessStoppedOutsideAnyWindowStaysStopped) {
  Pipe to_parent;
  Child child([&] {
    ::setpgid(0, 0);
    { HeldWindow window; }  // the watchdog exists, idle
    to_parent.put("o", 1);
    for (;;) ::pause();
  });
  to_parent.close_write();
  ASSERT_EQ(to_parent.take(1, 20s), "o");
  ::kill(child.pid(), SIGSTOP);
  const auto stopped = child.wait_status(20s, true);
  ASSERT_TRUE(stopped.has_value());
  ASSERT_TRUE(WIFSTOPPED(*stopped));
  std::this_thread::sleep_for(2 * kStoppedTracerBound + 300ms);
  EXPECT_FALSE(child.wait_status(0ms).has_value()) << "killed although no window was open";
  EXPECT_EQ(state_of(child.pid()), 'T');
  ::kill(child.pid(), SIGCONT);
}

}  // namespace
}  // namespace hangscope::native
