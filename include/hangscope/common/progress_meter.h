// A status line on stderr for the phases of a long command that last over a second: redrawn in
// place on a terminal, one plain line per long phase in a log.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace hangscope {

// Where the status line goes.
class StatusOutput {
 public:
  virtual ~StatusOutput() = default;
  // A terminal: the line is redrawn in place (carriage return, erase to the end of the line).
  virtual bool is_terminal() const = 0;
  // The terminal's width in columns (0: unknown).
  virtual std::size_t columns() const = 0;
  // Writes the bytes as they are, at once.
  virtual void write(std::string_view bytes) = 0;
};

// Whether stderr is a terminal that takes the status line: isatty(2), and TERM is not "dumb".
bool stderr_is_terminal();

// stderr (a terminal as stderr_is_terminal() says), written with write(2).
std::unique_ptr<StatusOutput> stderr_status_output();

// What a line written to stderr starts with so that it never follows the status line's text:
// "\r\x1b[K" (back to the start, erase the line) on a terminal, else nothing.
const char* stderr_line_start();

// The phases in progress and the line that shows them. Thread-safe: tasks are started, updated
// and ended on any thread, and tick() redraws (ProgressTicker calls it). A phase is shown only
// once it has lasted `delay`; on a terminal the line is redrawn at most every `redraw` and
// erased when nothing long is left; elsewhere each long phase is one line, written once.
class ProgressMeter {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  enum class Unit { kItems, kBytes };

  struct Options {
    std::chrono::milliseconds delay{1000};
    std::chrono::milliseconds redraw{100};
    bool enabled = true;  // false (--quiet, --json): nothing is ever written
  };

  // One phase (reading a file, the analysis, …), from construction to destruction.
  class Task {
   public:
    Task() = default;  // shows nothing (no meter)
    Task(Task&& other) noexcept;
    Task& operator=(Task&& other) noexcept;
    Task(const Task&) = delete;
    Task& operator=(const Task&) = delete;
    ~Task();

    // A new step of the phase (`what`: "parsing"), counted from now: done 0 of `total`
    // (0: unknown).
    void stage(std::string what, std::uint64_t total = 0, Unit unit = Unit::kItems);
    // How far the current step is.
    void set_done(std::uint64_t done);
    void add_done(std::uint64_t done);
    // The phase ends now (as the destructor does).
    void end();

   private:
    friend class ProgressMeter;
    Task(ProgressMeter* meter, std::uint64_t id) : meter_(meter), id_(id) {}
    ProgressMeter* meter_ = nullptr;
    std::uint64_t id_ = 0;
  };

  ProgressMeter(StatusOutput& out, Options options, Clock clock = std::chrono::steady_clock::now);
  ~ProgressMeter();  // erases the line
  ProgressMeter(const ProgressMeter&) = delete;
  ProgressMeter& operator=(const ProgressMeter&) = delete;

  // A phase: `what` ("reading") of `name` (a file, a node: shown through printable(), so names
  // from outside never reach the terminal raw), done 0 of `total` (0: unknown).
  Task start(std::string what, std::string name = "", std::uint64_t total = 0,
             Unit unit = Unit::kItems);

  // Redraws the line when it is due.
  void tick();

  // A whole message line ("hangscope: …\n" already formatted) that must not be garbled by the
  // status line: the line is erased first and redrawn on the next tick.
  void print(std::string_view line);

  bool enabled() const { return options_.enabled; }

 private:
  struct Phase {
    std::uint64_t id;
    std::string what, name;
    std::uint64_t done = 0, total = 0;
    Unit unit = Unit::kItems;
    std::chrono::steady_clock::time_point since;
    bool announced = false;  // its one plain line was written (not a terminal)
  };

  Phase* find(std::uint64_t id);
  void update(std::uint64_t id, const std::function<void(Phase&)>& change);
  void finish(std::uint64_t id);
  std::string line_of(std::chrono::steady_clock::time_point now) const;
  void erase_line();  // with mutex_ held

  StatusOutput& out_;
  Options options_;
  Clock clock_;
  bool terminal_;
  std::mutex mutex_;
  std::list<Phase> phases_;
  std::uint64_t next_id_ = 1;
  bool shown_ = false;  // a status line is on the terminal
  std::string last_line_;
  std::chrono::steady_clock::time_point last_draw_{};
};

// Calls meter.tick() every `period` on its own thread, from construction to destruction.
class ProgressTicker {
 public:
  explicit ProgressTicker(ProgressMeter& meter,
                          std::chrono::milliseconds period = std::chrono::milliseconds(100));
  ~ProgressTicker();
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

 private:
  ProgressMeter& meter_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// "12.3 MB" (decimal units, as `ls -h --si` would).
std::string format_bytes(std::uint64_t bytes);

// `text` cut to at most `columns` code points (a valid UTF-8 text stays valid), "…" at the cut.
std::string fit_columns(const std::string& text, std::size_t columns);

}  // namespace hangscope
