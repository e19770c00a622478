// Ray: compiled-graph channels, ray.get, and the core worker's waits in C++; its actors' titles
// and its job id.
#include "hangscope/waits/frameworks.h"
#include "table_entries.h"

namespace hangscope::waits {
using table_entries::py;
using table_entries::sym;

const FrameworkTable& ray_table() {
  static const FrameworkTable table{
      .name = "ray",
      .python_waits =
          {
              {py("ray/experimental/channel/",
                  {"read", "write", "begin_read", "_read_list", "read_list", "ensure_registered"}),
               WaitKind::kChannel, ""},
              {py("ray/experimental/compiled_dag_ref.py", {"get"}), WaitKind::kChannel, "ray.get"},
              {py("ray/_private/worker.py", {"get", "get_objects", "wait"}), WaitKind::kChannel,
               ""},
          },
      .native_waits =
          {
              {sym("MutableObjectManager::ReadAcquire"), WaitKind::kChannel, "ray channel read"},
              {sym("MutableObjectManager::WriteAcquire"), WaitKind::kChannel, "ray channel write"},
              {sym("CoreWorker::GetObjects"), WaitKind::kChannel, "ray.get"},
              {sym("CoreWorker::Get"), WaitKind::kChannel, "ray.get"},
          },
      // ray::RayWorkerWrapper… (v1 workers), ray::vllm_Worker_{id}_TP{t}_PP{p} (v2 actors):
      // ranks; any other actor or task: the driver's.
      .title =
          ProcessTitle{
              .marker = "ray::",
              .names = {{TitleName::Match::kContains, "Worker", model::ProcessRole::kRank,
                         TitleRanks::kFromTp},
                        {TitleName::Match::kAny, "", model::ProcessRole::kDriver,
                         TitleRanks::kFromTp}},
          },
      .job_variables = JobVariables{.prefix = "ray-job:", .required = {"RAY_JOB_ID"}},
  };
  return table;
}

}  // namespace hangscope::waits
