#include "hangscope/python/merge.h"

#include <gtest/gtest.h>

namespace hangscope::python {
namespace {

const std::string kPython = "/usr/bin/python3.11";

model::Frame native(const std::string& function, const std::string& module = kPython) {
  model::Frame f;
  f.function = function;
  f.module = module;
  return f;
}

PyFrame py(const std::string& function, bool entry) {
  PyFrame f;
  f.function = f.qualname = function;
  f.file = "/app/x.py";
  f.line = 7;
  f.eval_entry = entry;
  return f;
}

std::vector<std::string> names(const std::vector<model::Frame>& frames) {
  std::vector<std::string> out;
  for (const auto& f : frames) {
    out.push_back((f.kind == model::Frame::Kind::kPython ? "py:" : "") + f.function);
  }
  return out;
}

TEST(Merge, EvalFramesBecomeTheirPythonGroupsAndPlumbingIsHidden) {
  const std::vector<model::Frame> stack = {
      native("pthread_cond_wait", "/lib/libc.so.6"),
      native("c10d::Work::wait", "/lib/libtorch_cpu.so"),
      native("cfunction_call"),
      native("_PyEval_EvalFrameDefault"),
      native("_PyFunction_Vectorcall"),
      native("torch_callback", "/lib/libtorch_python.so"),  // C++ calling back into Python
      native("_PyEval_EvalFrameDefault.cold"),
      native("Py_RunMain"),
      native("__libc_start_main", "/lib/libc.so.6")};
  const std::vector<PyFrame> python = {py("barrier", false), py("init", true), py("main", true)};
  const auto merged = merge_stacks(stack, python, kPython);
  EXPECT_EQ(merged.merge, "ok");
  EXPECT_EQ(
      names(merged.frames),
      (std::vector<std::string>{"pthread_cond_wait", "c10d::Work::wait", "py:barrier", "py:init",
                                "torch_callback", "py:main", "__libc_start_main"}));
}

TEST(Merge, MismatchShowsBothStacksAndSaysWhy) {
  const std::vector<model::Frame> stack = {native("poll", "/lib/libc.so.6"),
                                           native("_PyEval_EvalFrameDefault")};
  const std::vector<PyFrame> python = {py("a", true), py("b", true)};
  const auto merged = merge_stacks(stack, python, kPython);
  EXPECT_EQ(
      merged.merge,
      "failed: 1 native eval frames for 2 Python frame groups; both stacks shown, Python first");
  EXPECT_EQ(names(merged.frames),
            (std::vector<std::string>{"py:a", "py:b", "poll", "_PyEval_EvalFrameDefault"}));
}

TEST(Merge, ThreadWithoutPythonKeepsEveryNativeFrame) {
  const std::vector<model::Frame> stack = {native("epoll_wait", "/lib/libc.so.6"),
                                           native("PyThread_start", kPython)};
  const auto merged = merge_stacks(stack, {}, kPython);
  EXPECT_EQ(merged.merge, "ok");
  EXPECT_EQ(merged.frames.size(), 2u);
}

}  // namespace
}  // namespace hangscope::python
