// Ray: compiled-graph channels, ray.get, and the core worker's waits in C++.
#include "hangscope/waits/frameworks.h"
#include "table_entries.h"

namespace hangscope::waits {
using table_entries::py;
using table_entries::sym;

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
