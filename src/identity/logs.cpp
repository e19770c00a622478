#include "hangscope/identity/logs.h"

#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <optional>

#include "hangscope/common/files.h"
#include "hangscope/common/redaction.h"
#include "hangscope/proc/process_fs.h"

namespace hangscope::identity {

using model::LogExcerpt;
namespace {

bool contains_any(std::string_view line, std::initializer_list<std::string_view> needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](std::string_view n) { return line.find(n) != std::string_view::npos; });
}

bool matters(std::string_view line) {
  return contains_any(line, {"Timed out",
                             "timed out",
                             "timeout",
                             "Timeout",
                             "Traceback",
                             "Error",
                             "ERROR",
                             "WARNING",
                             "Warning",
                             "Connection closed",
                             "world_size=",
                             "Config cache hit",
                             "Tuning ",
                             "Loaded ",
                             "No available shared memory",
                             "Watchdog",
                             "RayChannelTimeoutError",
                             "pair closure",
                             "disabled",
                             "torch.compile",
                             "Directly load",
                             "Compiling a graph"});
}

}  // namespace

std::string mask_log_line(std::string_view line) {
  std::string out;
  std::size_t pos = 0;
  bool mask_next = false;
  while (pos < line.size()) {
    const auto space = line.find(' ', pos);
    const auto end = space == std::string_view::npos ? line.size() : space;
    std::string_view word = line.substr(pos, end - pos);
    std::string masked(word);
    if (mask_next && !word.empty()) {
      masked = kMasked;
      mask_next = false;
    } else if (word == "Bearer" || word == "bearer") {
      mask_next = true;
    } else if (const auto eq = word.find('='); eq != std::string_view::npos && eq > 0) {
      std::string_view name = word.substr(0, eq);
      while (!name.empty() && name.front() == '-') name.remove_prefix(1);
      if (is_secret_name(name) || looks_like_secret(word.substr(eq + 1))) {
        masked = std::string(word.substr(0, eq + 1)) + std::string(kMasked);
      }
    } else if (word.size() > 2 && word.substr(0, 2) == "--" && is_secret_name(word.substr(2))) {
      mask_next = true;
    } else if (looks_like_secret(word)) {
      masked = kMasked;
    }
    out += masked;
    if (end < line.size()) out += ' ';
    pos = end + 1;
  }
  return mask_url_credentials(out);
}

std::vector<std::string> interesting_lines(std::string_view text, std::size_t tail) {
  std::vector<std::string_view> all;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) end = text.size();
    if (end > pos) all.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  // The last kMaxLines that matter, found from the end: only those are masked and copied (a log
  // of a million error lines costs its views, not a million masked copies).
  constexpr std::size_t kMaxLines = 200;
  std::vector<std::size_t> picked;
  for (std::size_t i = all.size(); i-- > 0 && picked.size() < kMaxLines;) {
    if (matters(all[i]) || i + tail >= all.size()) picked.push_back(i);
  }
  std::vector<std::string> kept;
  kept.reserve(picked.size());
  for (auto i = picked.rbegin(); i != picked.rend(); ++i) kept.push_back(mask_log_line(all[*i]));
  return kept;
}

std::vector<LogExcerpt> read_process_logs(pid_t pid, std::size_t max_bytes) {
  std::vector<LogExcerpt> logs;
  std::vector<std::pair<dev_t, ino_t>> seen;
  for (int fd : {1, 2}) {
    // The kernel's link to the open file, followed; a tty, pipe, FIFO or socket is refused
    // without being opened.
    const std::string link = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
    const OpenedFile file = open_regular_file(link, "log");
    if (!file.ok()) continue;
    const auto id = std::make_pair(file.st.st_dev, file.st.st_ino);
    if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
    seen.push_back(id);
    std::array<char, 4096> target{};
    const ssize_t n = ::readlink(link.c_str(), target.data(), target.size() - 1);
    const auto read = read_opened_file(file, max_bytes, true);
    logs.push_back({n > 0 ? std::string(target.data(), static_cast<std::size_t>(n)) : link,
                    interesting_lines(read.text.value_or(""))});
  }
  return logs;
}

std::vector<LogExcerpt> read_ray_worker_logs(pid_t pid, const std::string& ray_root,
                                             std::size_t max_bytes) {
  std::vector<LogExcerpt> logs;
  // Anyone may write under /tmp/ray: a log is read only when it is a regular file (no link)
  // of the worker's own user or root.
  const auto status = proc::ProcessFs(pid).task_status(pid);
  if (!status || !status->effective_uid) return logs;
  const OpenRules rules{Links::kRefuse, status->effective_uid};
  const std::string pattern = ray_root + "/session_*/logs/worker-*-" + std::to_string(pid) + ".*";
  glob_t found{};
  if (::glob(pattern.c_str(), 0, nullptr, &found) == 0) {
    for (std::size_t i = 0; i < found.gl_pathc; ++i) {
      const std::string path = found.gl_pathv[i];
      if (!path.ends_with(".out") && !path.ends_with(".err")) continue;
      const auto read = read_file_tail(path, "Ray worker log", max_bytes, rules);
      if (read.text) logs.push_back({path, interesting_lines(*read.text)});
    }
  }
  ::globfree(&found);
  return logs;
}

std::map<pid_t, LogExcerpt> attribute_shared_logs(const std::vector<std::string>& globs,
                                                  const std::set<pid_t>& pids,
                                                  std::size_t max_bytes) {
  std::map<pid_t, std::string> text_by_pid;
  std::map<pid_t, std::string> path_by_pid;
  for (const auto& pattern : globs) {
    glob_t found{};
    if (::glob(pattern.c_str(), 0, nullptr, &found) != 0) {
      ::globfree(&found);
      continue;
    }
    for (std::size_t i = 0; i < found.gl_pathc; ++i) {
      const std::string path = found.gl_pathv[i];
      // The operator's glob: links followed, but a FIFO or device is never opened.
      const auto read = read_file_tail(path, "log", max_bytes);
      if (!read.text) continue;
      const std::string& text = *read.text;
      std::size_t pos = 0;
      while (pos < text.size()) {
        auto end = text.find_first_of("\r\n", pos);
        if (end == std::string::npos) end = text.size();
        const std::string_view line(text.data() + pos, end - pos);
        pos = end + 1;
        const auto at = line.find("pid=");
        if (at == std::string_view::npos) continue;
        pid_t pid = 0;
        const char* digits = line.data() + at + 4;
        const auto r = std::from_chars(digits, line.data() + line.size(), pid);
        if (r.ec != std::errc() || !pids.count(pid)) continue;
        text_by_pid[pid].append(line).push_back('\n');
        path_by_pid[pid] = path;
      }
    }
    ::globfree(&found);
  }
  std::map<pid_t, LogExcerpt> out;
  for (const auto& [pid, text] : text_by_pid)
    out[pid] = {path_by_pid[pid], interesting_lines(text)};
  return out;
}

}  // namespace hangscope::identity
