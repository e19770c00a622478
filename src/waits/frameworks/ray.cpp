// Ray: compiled-graph channels, ray.get, and the core worker's waits in C++.
#include "hangscope/waits/frameworks.h"

namespace hangscope::waits {
namespace {

model::FramePattern py(std::string file, std::vector<std::string> functions = {}) {
  return model::FramePattern::python(std::move(file), std::move(functions));
}
model::FramePattern sym(std::string fragment) {
  return model::FramePattern::native_symbol(std::move(fragment));
}

}  // namespace

const FrameworkTable& ray_table() {
  static const FrameworkTable table{
      "ray",
      {
          {py("ray/experimental/channel/",
              {"read", "write", "begin_read", "_read_list", "read_list", "ensure_registered"}),
           WaitKind::kChannel, ""},
          {py("ray/experimental/compiled_dag_ref.py", {"get"}), WaitKind::kChannel, "ray.get"},
          {py("ray/_private/worker.py", {"get", "get_objects", "wait"}), WaitKind::kChannel, ""},
      },
      {
          {sym("MutableObjectManager::ReadAcquire"), WaitKind::kChannel, "ray channel read"},
          {sym("MutableObjectManager::WriteAcquire"), WaitKind::kChannel, "ray channel write"},
          {sym("CoreWorker::GetObjects"), WaitKind::kChannel, "ray.get"},
          {sym("CoreWorker::Get"), WaitKind::kChannel, "ray.get"},
      },
      {},
  };
  return table;
}

}  // namespace hangscope::waits
