// The Python standard library (threading, queue, concurrent.futures, selectors, subprocess,
// multiprocessing) and the ASGI server the API servers run in (uvicorn).
#include "hangscope/waits/frameworks.h"
#include "table_entries.h"

namespace hangscope::waits {
using table_entries::py;

const FrameworkTable& python_table() {
  static const FrameworkTable table{
      .name = "python",
      .python_waits =
          {
              {py("/threading.py", {"wait", "join", "_wait_for_tstate_lock", "acquire"}),
               WaitKind::kLock, ""},
              {py("/queue.py", {"get", "put", "join"}), WaitKind::kLock, ""},
              {py("concurrent/futures/", {"result", "wait", "as_completed"}), WaitKind::kLock, ""},
              {py("/selectors.py", {"select"}), WaitKind::kSleep, "select"},
              {py("/subprocess.py", {"wait", "_wait", "_try_wait", "communicate"}), WaitKind::kLock,
               "subprocess wait"},
          },
      .frames =
          {
              {FrameMeaning::kApiServerThread, py("/uvicorn/")},
              // multiprocessing's own helpers: the resource tracker's main, the fork server.
              {FrameMeaning::kMultiprocessingHelper, py("/multiprocessing/", {"main"})},
              {FrameMeaning::kMultiprocessingHelper, py("/multiprocessing/forkserver.py")},
              {FrameMeaning::kMultiprocessingHelper, py("/multiprocessing/popen_forkserver.py")},
          },
  };
  return table;
}

}  // namespace hangscope::waits
