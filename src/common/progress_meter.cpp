#include "hangscope/common/progress_meter.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "hangscope/common/text.h"

namespace hangscope {
namespace {

// stderr through write(2): the line is one write, never split by a stream's buffer.
class StderrOutput : public StatusOutput {
 public:
  StderrOutput() : terminal_(stderr_is_terminal()) {}
  bool is_terminal() const override { return terminal_; }
  std::size_t columns() const override {
    winsize size{};
    if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) != 0) return 0;
    return size.ws_col;
  }
  void write(std::string_view bytes) override {
    while (!bytes.empty()) {
      const ssize_t n = ::write(STDERR_FILENO, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // stderr gone: progress is not worth failing for
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

 private:
  bool terminal_ = false;
};

// "3 of 10", "45.0 MB of 100.0 MB", "3", "" (nothing counted yet, no total).
std::string counts_of(std::uint64_t done, std::uint64_t total, ProgressMeter::Unit unit) {
  const auto amount = [unit](std::uint64_t n) {
    return unit == ProgressMeter::Unit::kBytes ? format_bytes(n) : std::to_string(n);
  };
  if (total > 0) return amount(done) + " of " + amount(total);
  return done > 0 ? amount(done) : "";
}

}  // namespace

bool stderr_is_terminal() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDERR_FILENO) == 1 && !(term != nullptr && std::strcmp(term, "dumb") == 0);
}

std::unique_ptr<StatusOutput> stderr_status_output() {
  return std::make_unique<StderrOutput>();
}

const char* stderr_line_start() {
  return stderr_is_terminal() ? "\r\x1b[K" : "";
}

std::string format_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1000.0 && unit + 1 < std::size(units)) {
    value /= 1000.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

std::string fit_columns(const std::string& text, std::size_t columns) {
  std::size_t points = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;  // a continuation byte
    if (++points == columns) {
      // Code point `columns` starts at i: keep columns - 1 of them and the ellipsis.
      return text.substr(0, i) + "\xE2\x80\xA6";
    }
  }
  return text;
}

// ---- Task ----

ProgressMeter::Task::Task(Task&& other) noexcept : meter_(other.meter_), id_(other.id_) {
  other.meter_ = nullptr;
}

ProgressMeter::Task& ProgressMeter::Task::operator=(Task&& other) noexcept {
  if (this != &other) {
    end();
    meter_ = other.meter_;
    id_ = other.id_;
    other.meter_ = nullptr;
  }
  return *this;
}

ProgressMeter::Task::~Task() {
  end();
}

void ProgressMeter::Task::stage(std::string what, std::uint64_t total, Unit unit) {
  if (meter_ == nullptr) return;
  meter_->update(id_, [&](Phase& p) {
    p.what = std::move(what);
    p.done = 0;
    p.total = total;
    p.unit = unit;
  });
}

void ProgressMeter::Task::set_done(std::uint64_t done) {
  if (meter_ != nullptr) meter_->update(id_, [done](Phase& p) { p.done = done; });
}

void ProgressMeter::Task::add_done(std::uint64_t done) {
  if (meter_ != nullptr) meter_->update(id_, [done](Phase& p) { p.done += done; });
}

void ProgressMeter::Task::end() {
  if (meter_ == nullptr) return;
  meter_->finish(id_);
  meter_ = nullptr;
}

// ---- ProgressMeter ----

ProgressMeter::ProgressMeter(StatusOutput& out, Options options, Clock clock)
    : out_(out), options_(options), clock_(std::move(clock)), terminal_(out.is_terminal()) {}

ProgressMeter::~ProgressMeter() {
  std::lock_guard<std::mutex> lock(mutex_);
  erase_line();
}

ProgressMeter::Task ProgressMeter::start(std::string what, std::string name, std::uint64_t total,
                                         Unit unit) {
  if (!options_.enabled) return Task();
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uint64_t id = next_id_++;
  phases_.push_back({id, std::move(what), std::move(name), 0, total, unit, clock_(), false});
  return Task(this, id);
}

ProgressMeter::Phase* ProgressMeter::find(std::uint64_t id) {
  for (auto& p : phases_) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

void ProgressMeter::update(std::uint64_t id, const std::function<void(Phase&)>& change) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto* p = find(id)) change(*p);
}

void ProgressMeter::finish(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  phases_.remove_if([id](const Phase& p) { return p.id == id; });
  // The line goes with the last long phase at once; another one left is redrawn by tick().
  if (shown_ && line_of(clock_()).empty()) erase_line();
}

std::string ProgressMeter::line_of(std::chrono::steady_clock::time_point now) const {
  std::string line;
  for (const auto& p : phases_) {
    if (now - p.since < options_.delay) continue;
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now - p.since).count();
    std::string part = p.what + (p.name.empty() ? "" : " " + printable(p.name));
    const std::string counts = counts_of(p.done, p.total, p.unit);
    part += (counts.empty() ? " (" : ": " + counts + " (") + std::to_string(seconds) + " s)";
    line += (line.empty() ? "" : " · ") + part;
  }
  return line;
}

void ProgressMeter::erase_line() {
  if (!shown_) return;
  out_.write("\r\x1b[K");
  shown_ = false;
  last_line_.clear();
}

void ProgressMeter::tick() {
  if (!options_.enabled) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = clock_();
  if (!terminal_) {
    // A log: one line per phase that lasts `delay`, when it does; nothing is redrawn.
    for (auto& p : phases_) {
      if (p.announced || now - p.since < options_.delay) continue;
      p.announced = true;
      const std::string counts = counts_of(p.done, p.total, p.unit);
      out_.write("hangscope: " + p.what + (p.name.empty() ? "" : " " + printable(p.name)) +
                 (counts.empty() ? "" : " (" + counts + ")") + "...\n");
    }
    return;
  }
  const std::string line = line_of(now);
  if (line.empty()) {
    erase_line();
    return;
  }
  if (shown_ && now - last_draw_ < options_.redraw) return;
  const std::size_t columns = out_.columns();
  // One column short of the width: a line that fills it would wrap, and \r would not return.
  std::string text = "hangscope: " + line;
  if (columns > 1) text = fit_columns(text, columns - 1);
  if (shown_ && text == last_line_) return;
  out_.write("\r" + text + "\x1b[K");
  shown_ = true;
  last_line_ = std::move(text);
  last_draw_ = now;
}

void ProgressMeter::print(std::string_view line) {
  std::lock_guard<std::mutex> lock(mutex_);
  erase_line();
  out_.write(line);
}

// ---- ProgressTicker ----

ProgressTicker::ProgressTicker(ProgressMeter& meter, std::chrono::milliseconds period)
    : meter_(meter) {
  if (!meter.enabled()) return;  // nothing to draw: no thread
  thread_ = std::thread([this, period] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
      lock.unlock();
      meter_.tick();
      lock.lock();
    }
  });
}

ProgressTicker::~ProgressTicker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace hangscope
