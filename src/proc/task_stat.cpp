#include "hangscope/proc/task_stat.h"

#include <charconv>

namespace hangscope::proc {
namespace {

template <typename T>
bool parse_number(std::string_view word, T& out) {
  const auto result = std::from_chars(word.data(), word.data() + word.size(), out);
  return result.ec == std::errc() && result.ptr == word.data() + word.size();
}

// Splits on single spaces (stat fields never contain spaces after the comm).
std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\t')) ++pos;
    const std::size_t start = pos;
    while (pos < text.size() && text[pos] != ' ' && text[pos] != '\n' && text[pos] != '\t') ++pos;
    if (pos > start) words.push_back(text.substr(start, pos - start));
  }
  return words;
}

}  // namespace

std::optional<TaskStat> parse_task_stat(std::string_view text) {
  const auto open = text.find('(');
  const auto close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  TaskStat stat;
  std::string_view tid_text = text.substr(0, open);
  while (!tid_text.empty() && tid_text.back() == ' ') tid_text.remove_suffix(1);
  if (!parse_number(tid_text, stat.tid)) return std::nullopt;
  stat.comm = std::string(text.substr(open + 1, close - open - 1));
  // Fields after the comm start at field 3 (state); index 0 below is field 3.
  const auto fields = split_words(text.substr(close + 1));
  if (fields.size() < 20 || fields[0].size() != 1) return std::nullopt;
  stat.state = fields[0][0];
  if (!parse_number(fields[1], stat.ppid)) return std::nullopt;
  if (!parse_number(fields[6], stat.flags)) return std::nullopt;              // field 9
  if (!parse_number(fields[11], stat.utime_ticks)) return std::nullopt;       // field 14
  if (!parse_number(fields[12], stat.stime_ticks)) return std::nullopt;       // field 15
  if (!parse_number(fields[19], stat.start_time_ticks)) return std::nullopt;  // field 22
  return stat;
}

TaskStatus parse_task_status(std::string_view text) {
  TaskStatus status;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    const auto values = split_words(line.substr(colon + 1));
    if (key == "TracerPid" && !values.empty()) {
      parse_number(values[0], status.tracer_pid);
    } else if (key == "voluntary_ctxt_switches" && !values.empty()) {
      parse_number(values[0], status.voluntary_switches);
    } else if (key == "nonvoluntary_ctxt_switches" && !values.empty()) {
      parse_number(values[0], status.involuntary_switches);
    } else if (key == "Uid" && values.size() >= 2) {
      uid_t uid = 0;
      if (parse_number(values[1], uid)) status.effective_uid = uid;
    } else if (key == "NSpid") {
      for (const auto word : values) {
        pid_t id = 0;
        if (parse_number(word, id)) status.ns_pids.push_back(id);
      }
    }
  }
  return status;
}

}  // namespace hangscope::proc
