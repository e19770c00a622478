#include "hangscope/model/frame_pattern.h"

#include <algorithm>

namespace hangscope::model {
namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

FramePattern FramePattern::python(std::string file, std::vector<std::string> functions) {
  FramePattern p;
  p.file = std::move(file);
  p.functions = std::move(functions);
  return p;
}

FramePattern FramePattern::native_symbol(std::string fragment) {
  FramePattern p;
  p.native = std::move(fragment);
  return p;
}

bool FramePattern::empty() const {
  return file.empty() && functions.empty() && native.empty() && function_regex.empty();
}

bool FramePattern::names(std::string_view name) const {
  return functions.empty() ||
         std::find(functions.begin(), functions.end(), name) != functions.end();
}

bool FramePattern::matches_symbol(std::string_view symbol) const {
  return !native.empty() && symbol.find(native) != std::string_view::npos;
}

bool FramePattern::matches(const Frame& f) const {
  const bool python = f.kind == Frame::Kind::kPython;
  if (!native.empty() && (python || !matches_symbol(f.function))) return false;
  if (!file.empty()) {
    if (!python) return false;
    const bool found = file_match == FileMatch::kSuffix ? ends_with(f.file, file)
                                                        : f.file.find(file) != std::string::npos;
    if (!found) return false;
  }
  if (!functions.empty()) {
    const auto named = [&](const std::string& name) {
      if (f.function == name) return true;
      if (name_match == NameMatch::kFunction) return false;
      return f.qualname == name || ends_with(f.qualname, "." + name);
    };
    if (std::none_of(functions.begin(), functions.end(), named)) return false;
  }
  if (!function_regex.empty()) {
    if (!function_test) return false;
    if (!(*function_test)(f.function) && !(*function_test)(f.qualname)) return false;
  }
  return true;
}

bool any_python_frame(const ProcessDump& dump, const FramePatterns& patterns) {
  for (const auto& t : dump.threads) {
    if (find_frame(t.python_frames, patterns) != nullptr) return true;
  }
  return false;
}

bool any_native_frame(const ProcessDump& dump, const FramePatterns& patterns) {
  for (const auto& t : dump.threads) {
    if (find_frame(t.native_frames, patterns) != nullptr) return true;
  }
  return false;
}

}  // namespace hangscope::model
