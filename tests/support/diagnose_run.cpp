#include "diagnose_run.h"

#include <gtest/gtest.h>

#include "command.h"
#include "target_process.h"

namespace hangscope::testing {

Diagnosis run_diagnose(const std::string& arguments, const std::string& bundle) {
  Diagnosis d;
  const bool temporary = bundle.empty();
  d.bundle = temporary ? temp_path("bundle") : bundle;
  const auto begin = std::chrono::steady_clock::now();
  const auto result = run_command(std::string(HANGSCOPE_BINARY) + " diagnose " + arguments +
                                  " --json -o " + d.bundle);
  d.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 begin);
  d.exit_code = result.exit_code;
  d.out = result.out;
  d.err = result.err;
  auto parsed = nlohmann::json::parse(result.out, nullptr, false);
  if (parsed.is_discarded()) {
    ADD_FAILURE() << "hangscope diagnose " << arguments << " printed no JSON (exit "
                  << result.exit_code << "):\n"
                  << result.out << result.err;
  } else {
    d.report = std::move(parsed);
  }
  if (temporary) run_command("rm -rf " + d.bundle);
  return d;
}

namespace {

const nlohmann::json* node_at(const nlohmann::json& report, std::size_t index) {
  if (!report.is_object() || !report.contains("nodes")) return nullptr;
  const auto& nodes = report["nodes"];
  return nodes.is_array() && index < nodes.size() ? &nodes[index] : nullptr;
}

}  // namespace

std::string Diagnosis::node_status(std::size_t index) const {
  const auto* node = node_at(report, index);
  return node ? node->value("status", "") : "";
}

std::string Diagnosis::node_error(std::size_t index) const {
  const auto* node = node_at(report, index);
  return node ? node->value("error", "") : "";
}

}  // namespace hangscope::testing
