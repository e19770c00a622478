// Renderings of a process dump: human text (like eu-stack), JSON (design.md contract), protobuf.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "hangscope/capture/process_dump.h"

namespace hangscope::v1 {
class ProcessDump;
}

namespace hangscope::report {

std::string dump_to_text(const capture::ProcessDump& dump);
nlohmann::json dump_to_json(const capture::ProcessDump& dump);
void dump_to_proto(const capture::ProcessDump& dump, v1::ProcessDump& out);

}  // namespace hangscope::report
