#include "hangscope/analysis/call_tree.h"

#include <algorithm>

namespace hangscope::analysis {
namespace {

using model::Frame;

CallTreeNode& child(CallTreeNode& parent, const std::string& label, const std::string& kind) {
  for (auto& c : parent.children) {
    if (c.label == label && c.kind == kind) return c;
  }
  parent.children.push_back({label, kind, {}, {}, {}});
  return parent.children.back();
}

// The native frames inside the innermost Python frame, summarized as one leaf.
std::string native_leaf(const std::vector<Frame>& inner) {
  const Frame* named = nullptr;
  for (const auto& f : inner) {
    if (!f.function.empty()) {
      named = &f;
      break;
    }
  }
  std::string out = "native: ";
  out += named ? frame_label(*named) : "?";
  if (inner.size() > 1) out += " … (" + std::to_string(inner.size()) + " frames)";
  return out;
}

std::vector<std::pair<std::string, std::string>> path_of(const RankEntry& rank) {
  std::vector<std::pair<std::string, std::string>> path;
  const auto* stack = rank_stack(rank);
  if (stack == nullptr || stack->empty()) {
    path.push_back({"<" + std::string(to_string(rank.state)) +
                        (rank.history.empty() ? "" : ": no stack") + ">",
                    "state"});
    return path;
  }
  const auto innermost_python = std::find_if(
      stack->begin(), stack->end(), [](const Frame& f) { return f.kind == Frame::Kind::kPython; });
  if (innermost_python == stack->end()) {
    for (auto it = stack->rbegin(); it != stack->rend(); ++it) {
      path.push_back({frame_label(*it), "native"});
    }
    return path;
  }
  for (auto it = stack->rbegin(); it != stack->rend(); ++it) {
    if (it->kind == Frame::Kind::kPython) path.push_back({frame_label(*it), "python"});
  }
  const std::vector<Frame> inner(stack->begin(), innermost_python);
  if (!inner.empty()) path.push_back({native_leaf(inner), "native"});
  return path;
}

}  // namespace

std::string frame_label(const Frame& frame) {
  if (frame.kind == Frame::Kind::kPython) {
    return (frame.qualname.empty() ? frame.function : frame.qualname) + " (" +
           waits::short_path(frame.file) + ":" + std::to_string(frame.line) + ")";
  }
  if (!frame.function.empty()) {
    // Drop argument lists of C++ symbols: "f(int, long)" → "f".
    const auto paren = frame.function.find('(');
    return paren == std::string::npos || paren == 0 ? frame.function
                                                    : frame.function.substr(0, paren);
  }
  char offset[32];
  std::snprintf(offset, sizeof offset, "+0x%llx",
                static_cast<unsigned long long>(frame.module_offset));
  return (frame.module.empty() ? "?" : waits::short_path(frame.module)) + offset;
}

const model::FrameList* rank_stack(const RankEntry& rank) {
  const auto* latest = rank.latest();
  if (latest == nullptr || !latest->dump) return nullptr;
  for (const auto& t : latest->dump->threads) {
    if (t.tid != rank.wait.tid) continue;
    if (!t.frames.empty()) return &t.frames;
    return t.python_frames.empty() ? &t.native_frames : &t.python_frames;
  }
  return nullptr;
}

CallTreeNode build_call_tree(const Job& job) {
  CallTreeNode root{job.key.empty() ? "job" : "job " + job.key, "state", {}, {}, {}};
  for (const auto& rank : job.ranks) {
    if (!rank.rank) continue;
    root.ranks.insert(*rank.rank);
    if (rank.class_id) root.classes.insert(rank.class_id);
    CallTreeNode* at = &root;
    for (const auto& [label, kind] : path_of(rank)) {
      at = &child(*at, label, kind);
      at->ranks.insert(*rank.rank);
      if (rank.class_id) at->classes.insert(rank.class_id);
    }
  }
  return root;
}

}  // namespace hangscope::analysis
