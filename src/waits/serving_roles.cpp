#include "hangscope/waits/serving_roles.h"

#include <set>
#include <string_view>

#include "hangscope/model/frame_pattern.h"
#include "hangscope/waits/frameworks.h"

namespace hangscope::waits {
namespace {

bool title_has(const model::ProcessRecord& p, std::string_view word) {
  return p.identity.title.find(word) != std::string::npos;
}

bool any_thread_has(const model::ProcessRecord& p, FrameMeaning meaning) {
  return p.dump && model::any_python_frame(*p.dump, frames_meaning(meaning));
}

bool has_request_tasks(const model::ProcessRecord& p) {
  if (!p.dump) return false;
  for (const auto& task : p.dump->tasks) {
    if (find_meaning(task.coroutine, FrameMeaning::kRequest) ||
        find_meaning(task.coroutine, FrameMeaning::kOutputHandler)) {
      return true;
    }
  }
  return false;
}

bool is_engine(const model::ProcessRecord& p) {
  if (title_has(p, "EngineCore") || p.identity.role == model::ProcessRole::kEngine) return true;
  return any_thread_has(p, FrameMeaning::kBusyLoop);
}

// Ranks and their helpers have their part already; the others may be serving processes.
bool may_serve(const model::ProcessRecord& p) {
  return p.identity.role != model::ProcessRole::kRank &&
         p.identity.role != model::ProcessRole::kHelper;
}

}  // namespace

std::optional<model::ProcessRole> serving_role(const model::ProcessRecord& p,
                                               bool parent_of_engine) {
  if (is_engine(p)) return model::ProcessRole::kEngine;
  if (title_has(p, "DPCoordinator") || p.identity.role == model::ProcessRole::kCoordinator ||
      any_thread_has(p, FrameMeaning::kCoordinator)) {
    return model::ProcessRole::kCoordinator;
  }
  if (any_thread_has(p, FrameMeaning::kHealthCheckOnly)) return std::nullopt;
  if (title_has(p, "APIServer") || p.identity.role == model::ProcessRole::kApi ||
      has_request_tasks(p) || any_thread_has(p, FrameMeaning::kApiServerThread) ||
      (parent_of_engine && ((p.dump && !p.dump->tasks.empty()) ||
                            (any_thread_has(p, FrameMeaning::kServeCommand) &&
                             !any_thread_has(p, FrameMeaning::kServeLauncher))))) {
    return model::ProcessRole::kApi;
  }
  return std::nullopt;
}

std::size_t assign_serving_roles(std::vector<model::ProcessRecord>& processes) {
  std::set<pid_t> engine_parents;
  for (const auto& p : processes) {
    if (may_serve(p) && is_engine(p)) engine_parents.insert(p.ppid);
  }
  std::size_t changed = 0;
  for (auto& p : processes) {
    if (!may_serve(p)) continue;
    const auto role = serving_role(p, engine_parents.count(p.pid) > 0);
    if (!role || *role == p.identity.role) continue;
    p.identity.role = *role;
    ++changed;
  }
  return changed;
}

}  // namespace hangscope::waits
