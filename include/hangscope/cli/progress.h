// What diagnose and report show on stderr as they go: message lines and the status line of the
// phases that last over a second (docs/cli.md, "Progress"); none of it with --quiet, --json or
// --ticket.
#pragma once

#include <memory>
#include <string>

#include "hangscope/common/progress_meter.h"
#include "hangscope/sources/sources.h"

namespace hangscope::cli {

class Progress final : public sources::Feedback {
 public:
  explicit Progress(bool quiet);

  // "hangscope: LINE" on stderr; `line` names nodes, files and agents' answers: shown through
  // printable().
  void say(const std::string& line) const override;
  // print_error and print_warning (app.cpp): shown even when quiet.
  void error(const std::string& message) const override;
  void warning(const std::string& message) const override;

  // A phase, shown once it lasts over a second (see ProgressMeter::start).
  ProgressMeter::Task start(std::string what, std::string name = "",
                            std::uint64_t total = 0) const override;
  ProgressMeter::Task start(std::string what, std::string name, std::uint64_t total,
                            ProgressMeter::Unit unit) const;

  ProgressMeter* meter() const override { return meter_.get(); }

 private:
  bool quiet_;
  std::unique_ptr<StatusOutput> out_;
  std::unique_ptr<ProgressMeter> meter_;
  std::unique_ptr<ProgressTicker> ticker_;  // ends first: no tick after the meter is gone
};

}  // namespace hangscope::cli
