// The correlation of a bundle: jobs and their rank tables, each rank's wait point and
// progress across samples, the wait-for graph between ranks, classes of ranks that wait at the
// same place, and the verdicts that name the rank(s) that diverged.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hangscope/analysis/rank_set.h"
#include "hangscope/model/bundle.h"
#include "hangscope/waits/wait_point.h"

namespace hangscope::analysis {

enum class RankState { kRunning, kWaiting, kStopped, kUninterruptible, kDead, kMissing, kUnknown };
std::string_view to_string(RankState state);

// What the samples say about a rank's progress.
struct Progress {
  std::optional<bool> progressing;  // nullopt: one sample, or the rank was not captured
  bool cpu_grew = false;            // CPU time grew between the first and last sample
  bool stack_moved = false;         // the Python stack (frames, lines, locals) changed
  bool woke_up = false;             // its thread woke up more often than the captures explain
  std::uint64_t wakeups = 0;        // context switches of its thread between first and last
  bool state_changed = false;
  std::uint64_t cpu_ticks = 0;  // CPU time used between the first and last sample
  double seconds = 0;           // between the first and last sample
  // Probes of its waiting thread between the samples (docs/analysis.md, "Progress evidence"),
  // and how many found it outside the frame it waits in: it left the wait and came back.
  std::uint32_t probes = 0;
  std::uint32_t probes_outside = 0;
  // The awaited process group's sequence number (collectives issued on it) in the first and last
  // sample, when read; it advanced: the rank completed the collective it stood in. Group "" with
  // numbers set: no group's number advanced (the awaited group not known).
  std::string sequence_group;
  std::optional<std::uint64_t> sequence_first;
  std::optional<std::uint64_t> sequence_last;
  // Why neither waiting nor progressing could be told ("" when it could): a thread on CPU inside
  // a wait at every sample and probe, with no sequence number to tell a loop with no pause
  // from a wait that spins. `progressing` is then nullopt and no verdict rests on the rank.
  std::string undecided;
  std::string detail;  // for people: "CPU 38% and stack moved over 3 samples"
};

struct RankEntry {
  std::string job;
  std::optional<int> rank;  // in a group's job: the process's rank in that group
  std::string node;
  pid_t pid = 0;
  model::ProcessRole role = model::ProcessRole::kRank;
  // In a group's job (Job::group): the process's own torch job and global rank, when it has one.
  std::string world_job;
  std::optional<int> world_rank;
  std::optional<int> claimed_world_size;  // what the process says its job's size is
  // The groups outside the registry it holds (latest sample): group name → store key
  // (model::group_store_key), how it is known across processes.
  std::map<std::string, std::string> group_keys;
  // Every sample of the process, oldest first; empty for a missing or unknown rank.
  std::vector<const model::ProcessRecord*> history;
  std::vector<std::int64_t> sample_times_ns;  // coordinator clock
  RankState state = RankState::kUnknown;
  // A core's thread has no state letter: its state is read from where its stack stands (in a
  // blocking call: waiting; elsewhere: running), never guessed further.
  bool state_from_stack = false;
  waits::WaitPoint wait;
  Progress progress;
  std::optional<std::int64_t> stuck_since_ns;  // coordinator clock
  std::string stuck_since_source;              // "log" | "samples"
  int class_id = 0;                            // 0: in no class (missing, unknown)
  // Ranks this one waits for: present, missing or outside the job (a whole group of a size
  // read from memory is one range).
  RankSet waits_for;
  std::string waits_for_reason;  // how the edges were derived
  // Where the members of the awaited group came from: "memory" (torch's registry in the rank's
  // memory), "locals" (the waiting frame's arguments), "assumed" (the whole job), "" (no group).
  std::string membership;
  std::string group;                     // the awaited process group's name, when known
  bool tcp_known = false;                // its TCP connections were captured (net.tcp)
  std::vector<int> tcp_peers;            // ranks of the job it has a TCP connection with
  std::vector<int> missing_tcp_peers;    // ranks it should be connected to and is not
  std::vector<std::string> collectives;  // per process group, from its flight recorder

  const model::ProcessRecord* latest() const { return history.empty() ? nullptr : history.back(); }
};

// The state as reports show it: "waiting", or "waiting (stack)" when read from a core's stack.
std::string state_label(const RankEntry& entry);

struct RankClass {
  int id = 0;
  std::vector<int> ranks;
  std::string key;
  std::string description;         // "barrier in distributed_c10d.py:3145 ← main (x.py:9)"
  std::string state;               // the members' common state, or "mixed"
  std::size_t representative = 0;  // index into Job::ranks of a member
};

// A job's ranks: an entry per rank present (captured, or known from evidence such as a process
// taken for an absent rank), and the ranks of its world size that no entry holds as ranges.
// Everything built from a job costs its entries plus its ranges, never its world size: a
// snapshot may claim 2^31 - 1 ranks.
struct Job {
  std::string key;  // MASTER_ADDR:MASTER_PORT, … ("" when unknown); a group's store key
  // A group outside torch's registry (vLLM's stateless DP group, a StatelessProcessGroup):
  // its members are the processes that hold it, by their rank in it, whatever job they are in.
  struct Group {
    std::string type;          // "ProcessGroupGloo", "StatelessProcessGroup"
    std::string held_by;       // where its members hold it: "self.dp_group", …
    std::string noun() const;  // "DP rank" for a data-parallel group, else "group rank"
  };
  std::optional<Group> group;
  std::optional<int> world_size;
  std::vector<RankEntry> ranks;  // the ranks present, by rank (entries without a rank last)
  // Ranks 0..world_size-1 that no entry holds; their state is `missing_state`: kMissing when
  // every node answered, kUnknown when one did not.
  RankSet missing;
  RankState missing_state = RankState::kMissing;
  std::vector<RankClass> classes;                // largest first
  std::unordered_map<int, std::size_t> by_rank;  // rank -> index into ranks (see index())
  RankSet present;                               // the ranks of `ranks` (see index())
  bool tcp_meshed = false;  // the job uses gloo (a full mesh): a missing pair is evidence

  const RankEntry* find(int rank) const;
  // The state of a rank of the job: its entry's, `missing_state` for a missing one, nullopt for
  // a rank the job does not know.
  std::optional<RankState> state_of(int rank) const;
  // The entries whose rank is in `ranks`, by rank (the first of duplicates), at the cost of the
  // set's intervals and the entries found.
  std::vector<const RankEntry*> entries_in(const RankSet& ranks) const;
  // The missing ranks as an entry each would have been (the report lists them when few).
  RankEntry absent_entry(int rank) const;
  void index();  // rebuilds by_rank and present after ranks changed

 private:
  std::vector<std::pair<int, std::size_t>> sorted_;  // (rank, index), by rank (see index())
};

// Where a verdict comes from: the generic correlation, or a signature rule that recognised a
// known bug.
enum class VerdictKind { kGeneric, kSignature };
// "generic" | "signature": the `kind` that report.json and report.md write.
std::string_view to_string(VerdictKind kind);

// A process a verdict is about (docs/report.md, "processes"): where it runs, what it is, the
// group it is named in and its rank there, and whether it diverged or waits.
struct VerdictProcess {
  std::string node;
  pid_t pid = 0;
  std::string role;  // "rank", "engine", … (model::ProcessRole, or its serving role)
  std::string job;   // its own torch job ("" when it has none)
  std::optional<int> rank;
  std::string group;  // the group it waits in or is awaited in ("" when unknown)
  std::optional<int> group_rank;
  std::string side;  // "diverged" | "waiting"
};

struct Verdict {
  std::string id;
  VerdictKind kind = VerdictKind::kGeneric;
  std::string title;
  double confidence = 0;
  std::string job;
  // Ranges: a verdict about missing ranks may name 2^31 of them (report.json lists them only
  // when few, docs/report.md).
  RankSet diverged_ranks;
  RankSet waiting_ranks;
  std::string summary;  // one sentence: which rank, where, why
  std::vector<std::string> evidence;
  std::vector<std::string> remedies;
  std::vector<std::string> references;
  std::string explained_by;  // a signature verdict that explains this generic one
  // How the group members behind the verdict were known: memory | locals | flight-recorder |
  // assumed ("" when no group is involved).
  std::string membership;
  // The processes it names (a few per side), and the torch jobs they are in when several.
  std::vector<VerdictProcess> processes;
  std::vector<std::string> jobs;
};

// A process of interest that is no rank (engine, API server, helper, unidentified).
struct OtherProcess {
  std::string node;
  const model::ProcessRecord* process = nullptr;
  waits::WaitPoint wait;
};

// A process at the front of a serving deployment (vLLM V1, SGLang): an API server, an engine
// core or a DP coordinator, with what it does (docs/analysis.md, "The serving chain").
struct ServingProcess {
  model::ProcessRole role = model::ProcessRole::kUnidentified;  // kApi | kEngine | kCoordinator
  std::string node;
  const model::ProcessRecord* process = nullptr;  // its latest sample
  std::string title;                              // setproctitle's, "" when none
  // engine: "blocked" (its busy loop waits on the workers' output, or on its peers in a
  // collective such as the DP all-reduce), "idle" (it waits for requests: its input queue, a
  // ZMQ poll), "working" (on CPU, no wait), "unknown" (no busy loop on its stacks)
  std::string activity;
  waits::WaitPoint wait;            // engine: where its busy loop waits
  std::string waits_in;             // engine: that wait with the executor's call site, for people
  std::optional<bool> progressing;  // across samples; nullopt: one sample
  std::string progress;             // "no CPU, same stack over 3 samples"
  // api: asyncio tasks read from its memory (0: none, or the capture read no tasks)
  std::size_t tasks = 0;
  std::size_t pending_requests = 0;  // request tasks that await the engine's output
  std::size_t stuck_requests = 0;    // of those, pending in its first sample too (same task)
  std::size_t output_handlers = 0;   // tasks that pull the engine's output (output_handler)
  std::string requests_wait_in;      // where the request tasks wait (their coroutine chain)
  // api: how it is linked to its chain's engine cores: "connected to engine core node0 pid 900
  // over ipc:///tmp/…" (a socket pair), "parent of engine core …"; "" when it serves every
  // chain (linked to none)
  std::string link;
};

// The chain from the front of a serving deployment to the workers it waits for: API servers →
// engine cores → the workers' job and the ranks where its wait-for graph ends.
struct ServingChain {
  std::string framework;  // "vllm" | "sglang"
  std::vector<ServingProcess> api_servers;
  std::vector<ServingProcess> engines;
  std::vector<ServingProcess> coordinators;
  std::string job;                 // the workers' job ("" when none was linked)
  std::string job_link;            // how the workers' job was linked to the front
  RankSet awaited;                 // the workers the engine core waits for directly
  std::string awaited_reason;      // how those were known
  RankSet roots;                   // where the workers' wait-for graph ends, from `awaited`
  std::vector<std::string> links;  // the chain for people, front first
  bool tasks_read() const;         // some API server's asyncio tasks were read
};

struct Analysis {
  std::vector<Job> jobs;
  std::vector<OtherProcess> others;
  std::vector<ServingChain> serving;  // serving deployments found (vLLM, SGLang fronts)
  std::vector<Verdict> verdicts;      // ordered: signature first, then by confidence
  std::string conclusion;             // one sentence: the top verdict, or plainly why there is none
  // What the input says that cannot all be true (a negative rank, a rank past its job's world
  // size, ranks of one job claiming different world sizes, one rank claimed by two live
  // processes, one pid twice in a node's sample, two captures of one node for one sample), one
  // sentence each, with what the analysis did about it; it went on with the rest.
  std::vector<std::string> diagnostics;
  int samples = 0;  // samples per node (the most any node gave)
  double interval_seconds = 0;
};

// The stages of the analysis. diagnosis::diagnose (include/hangscope/diagnosis/diagnose.h)
// runs them in order and is the one place verdicts are made; they are public for it and for
// their tests. The results point into `bundle` (rank histories): keep it alive while using them.
// `diagnostics` (when given) gets a sentence for each inconsistency of the input (see
// Analysis::diagnostics); the rank table keeps what is consistent.
std::vector<Job> build_jobs(const model::Bundle& bundle,
                            std::vector<std::string>* diagnostics = nullptr);
void link_wait_graph(Job& job);
// The process group a rank's waiting call was given (its `group` local: a known group, or None
// for the default group), as the rank's own memory holds it in its latest sample; nullptr when
// that is not known.
const model::ProcessGroupState* awaited_group(const RankEntry& self);
void assign_classes(Job& job);
void link_tcp_peers(Job& job);
// Flight-recorder verdicts (collective-behind, collective-mismatch); sets the waiting ranks'
// wait-for edges and each rank's `collectives` lines.
std::vector<Verdict> correlate_flight_records(Job& job);
std::vector<Verdict> generic_verdicts(const Job& job);
// Ranks inside init_process_group / new_group waiting for ranks that never arrived
// (`rank-not-arrived`), with the processes that may be the absent ranks among `others`.
// `found`: the absent ranks matched to a process that holds no rank yet (rank → process).
std::optional<Verdict> init_verdict(const Job& job, const std::vector<OtherProcess>& others,
                                    std::map<int, const OtherProcess*>* found = nullptr);
std::vector<Verdict> node_verdicts(const std::vector<Job>& jobs,
                                   const std::vector<model::NodeStatus>& nodes);
// The processes of interest that are no rank (latest sample of each node).
std::vector<OtherProcess> other_processes(const model::Bundle& bundle);
// The processes init_verdict took for absent ranks stand in the rank table in their place.
void place_absent_ranks(Job& job, const std::map<int, const OtherProcess*>& found);
// Evidence from outside the stacks for a verdict on one of `jobs`: missing TCP peers, NCCL
// RAS problems, c10d store answers, vLLM broadcast rings.
void add_evidence(const std::vector<Job>& jobs, Verdict& v);
// The conclusion when no verdict names a rank, said plainly.
std::string no_divergence(const std::vector<Job>& jobs, int samples);
// A rank's progress across its samples (CPU time, stack, wake-ups), as the rank table measures
// it; also used for processes that are no rank (an engine core).
Progress progress_of(const RankEntry& entry);
// The serving deployments in `bundle` (serving_chain.cpp): API servers (titles, frames, asyncio
// tasks), engine cores (titles, the busy loop's frames), DP coordinators, linked by parent pid
// (else the only ones there are) to each other and to the workers' job in `jobs` (whose
// wait-for graph is linked), with the workers the engine waits for and the roots they lead to.
std::vector<ServingChain> serving_chains(const model::Bundle& bundle, const std::vector<Job>& jobs,
                                         const std::vector<OtherProcess>& others);
// The role a process plays in a serving chain of `analysis` ("api", "engine", "coordinator"),
// nullopt when it is in none.
std::optional<std::string> serving_role(const Analysis& analysis,
                                        const model::ProcessRecord& process);
// What the serving chains say when no verdict was reached (appended to the conclusion):
// requests in flight, the engine cores' activity and progress; "" without a chain.
std::string serving_note(const std::vector<ServingChain>& chains);
// The front-end verdict (`serving-stalled`): requests pending at the API server (or a step in
// flight in the engine core) while the engine core is blocked on workers whose graph ends at
// a stuck rank, named first; or pending requests while the engine core idles. `found`: the
// verdicts so far (the workers' job's root verdicts give the confidence).
std::vector<Verdict> serving_verdicts(const std::vector<ServingChain>& chains,
                                      const std::vector<Job>& jobs,
                                      const std::vector<Verdict>& found);
// The processes a verdict names, with their jobs (verdict_processes.cpp).
void name_processes(const Analysis& analysis, Verdict& v);
// A verdict on a group outside the registry that says no more than one on a torch job (the
// same diverged processes, all in that job) is dropped; one that links jobs leads the verdicts
// on the same diverged processes.
void merge_group_verdicts(const std::vector<Job>& jobs, std::vector<Verdict>& verdicts);
// Samples per node and the interval between them.
void measure_samples(const model::Bundle& bundle, Analysis& analysis);

}  // namespace hangscope::analysis
