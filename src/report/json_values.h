// JSON values shared by the report writers (report.json, dump --json): one spelling each.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

namespace hangscope::report {

// An optional as its value, or null when it has none (the documented JSON for "unknown").
template <typename T>
nlohmann::json json_or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace hangscope::report
