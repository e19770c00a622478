#include "hangscope/cli/progress.h"

#include "hangscope/cli/commands.h"
#include "hangscope/common/text.h"

namespace hangscope::cli {

Progress::Progress(bool quiet)
    : quiet_(quiet),
      out_(stderr_status_output()),
      meter_(std::make_unique<ProgressMeter>(*out_, ProgressMeter::Options{.enabled = !quiet})),
      ticker_(std::make_unique<ProgressTicker>(*meter_)) {}

void Progress::say(const std::string& line) const {
  if (!quiet_) meter_->print("hangscope: " + printable(line) + "\n");
}

void Progress::error(const std::string& message) const {
  print_error(message);
}

void Progress::warning(const std::string& message) const {
  print_warning(message);
}

ProgressMeter::Task Progress::start(std::string what, std::string name, std::uint64_t total) const {
  return meter_->start(std::move(what), std::move(name), total);
}

ProgressMeter::Task Progress::start(std::string what, std::string name, std::uint64_t total,
                                    ProgressMeter::Unit unit) const {
  return meter_->start(std::move(what), std::move(name), total, unit);
}

}  // namespace hangscope::cli
