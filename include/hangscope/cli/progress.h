// What diagnose and report show on stderr as they go: message lines and the status line of the
// phases that last over a second (docs/cli.md, "Progress"); none of it with --quiet, --json or
// --ticket.
#pragma once

#include <memory>
#include <string>

#include "hangscope/common/progress_meter.h"

namespace hangscope::cli {

class Progress {
 public:
  explicit Progress(bool quiet);

  // "hangscope: LINE" on stderr; `line` names nodes, files and agents' answers: shown through
  // printable().
  void say(const std::string& line) const;

  // A phase, shown once it lasts over a second (see ProgressMeter::start).
  ProgressMeter::Task start(std::string what, std::string name = "", std::uint64_t total = 0,
                            ProgressMeter::Unit unit = ProgressMeter::Unit::kItems) const;

  ProgressMeter& meter() const { return *meter_; }

 private:
  bool quiet_;
  std::unique_ptr<StatusOutput> out_;
  std::unique_ptr<ProgressMeter> meter_;
  std::unique_ptr<ProgressTicker> ticker_;  // ends first: no tick after the meter is gone
};

}  // namespace hangscope::cli
