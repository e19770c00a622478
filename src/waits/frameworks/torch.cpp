// torch.distributed: its collectives, point-to-point calls, stores, rendezvous and init, in
// Python (distributed_c10d.py) and in C++ (c10d, NCCL, gloo); the variables a launcher
// (torchrun, env://) gives its ranks.
#include "hangscope/waits/frameworks.h"
#include "table_entries.h"

namespace hangscope::waits {
using table_entries::py;
using table_entries::sym;

const FrameworkTable& torch_table() {
  static const FrameworkTable table{
      .name = "torch",
      .python_waits =
          {
              {py("torch/distributed/distributed_c10d.py", {"barrier",
                                                            "monitored_barrier",
                                                            "all_reduce",
                                                            "all_reduce_coalesced",
                                                            "all_reduce_multigpu",
                                                            "reduce",
                                                            "reduce_multigpu",
                                                            "broadcast",
                                                            "broadcast_multigpu",
                                                            "all_gather",
                                                            "all_gather_into_tensor",
                                                            "_all_gather_base",
                                                            "all_gather_coalesced",
                                                            "all_gather_multigpu",
                                                            "all_gather_object",
                                                            "broadcast_object_list",
                                                            "gather",
                                                            "gather_object",
                                                            "scatter",
                                                            "scatter_object_list",
                                                            "reduce_scatter",
                                                            "reduce_scatter_tensor",
                                                            "_reduce_scatter_base",
                                                            "reduce_scatter_multigpu",
                                                            "all_to_all",
                                                            "all_to_all_single"}),
               WaitKind::kCollective, ""},
              {py("torch/distributed/distributed_c10d.py",
                  {"send", "recv", "isend", "irecv", "batch_isend_irecv", "send_object_list",
                   "recv_object_list"}),
               WaitKind::kChannel, ""},
              {py("torch/distributed/distributed_c10d.py", {"_store_based_barrier"}),
               WaitKind::kStore, "store-based barrier"},
              {py("torch/distributed/distributed_c10d.py",
                  {"init_process_group", "new_group", "_new_group_with_tag"}),
               WaitKind::kRendezvous, ""},
              {py("torch/distributed/_symmetric_memory/", {"rendezvous"}), WaitKind::kRendezvous,
               "symmetric-memory rendezvous"},
              {py("torch/distributed/rendezvous.py"), WaitKind::kRendezvous, "store rendezvous"},
              {py("torch/distributed/elastic/rendezvous/"), WaitKind::kRendezvous,
               "elastic rendezvous"},
          },
      .native_waits =
          {
              {sym("c10d::TCPStore::doWait"), WaitKind::kStore, "store.wait"},
              {sym("c10d::TCPStore::wait"), WaitKind::kStore, "store.wait"},
              {sym("c10d::TCPStore::doGet"), WaitKind::kStore, "store.get"},
              {sym("c10d::TCPStore::get"), WaitKind::kStore, "store.get"},
              {sym("c10d::PrefixStore::wait"), WaitKind::kStore, "store.wait"},
              {sym("c10d::FileStore::wait"), WaitKind::kStore, "store.wait"},
              {sym("c10d::HashStore::wait"), WaitKind::kStore, "store.wait"},
              {sym("c10d::symmetric_memory::"), WaitKind::kRendezvous,
               "symmetric-memory rendezvous"},
              {sym("ProcessGroupNCCL::WorkNCCL::wait"), WaitKind::kCollective, "nccl wait"},
              {sym("ProcessGroupNCCL::WorkNCCL::synchronize"), WaitKind::kCollective, "nccl wait"},
              {sym("ncclGroupEnd"), WaitKind::kCollective, "nccl"},
              {sym("gloo::barrier"), WaitKind::kCollective, "gloo barrier"},
              {sym("gloo::allreduce"), WaitKind::kCollective, "gloo allreduce"},
              {sym("gloo::transport::tcp::UnboundBuffer::wait"), WaitKind::kCollective,
               "gloo wait"},
              {sym("c10d::ProcessGroupGloo"), WaitKind::kCollective, "gloo wait"},
              {sym("c10d::Work::wait"), WaitKind::kCollective, "work.wait"},
              {sym("c10d::ProcessGroup::Work::wait"), WaitKind::kCollective, "work.wait"},
          },
      .frames =
          {
              {FrameMeaning::kInitCall,
               py("torch/distributed/distributed_c10d.py", {"init_process_group", "new_group"})},
              {FrameMeaning::kInitArguments,
               py("torch/distributed/",
                  {"init_process_group", "_create_c10d_store", "_store_based_barrier",
                   "_tcp_rendezvous_handler", "_env_rendezvous_handler"})},
              {FrameMeaning::kGlooTransport, sym("gloo::")},
              {FrameMeaning::kGlooTransport, sym("ProcessGroupGloo")},
          },
      // The rendezvous address every rank of a job is given.
      .job_variables = JobVariables{.prefix = "", .required = {"MASTER_ADDR", "MASTER_PORT"}},
      .rank_variables =
          RankVariables{.rank = "RANK", .local_rank = "LOCAL_RANK", .world_size = "WORLD_SIZE"},
  };
  return table;
}

}  // namespace hangscope::waits
