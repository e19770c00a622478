// What watch sees of each job across observations (docs/watch.md, "What fires"): per poll, which
// ranks wait on peers and whether a collective of the job completed; across polls, since when
// a job has had waiting ranks and no completion, when that makes it suspect, the ranks that
// exited while their peers waited, and the history an incident keeps in watch.json.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hangscope/model/bundle.h"

namespace hangscope::watch {

// One rank of a job in one poll.
struct RankReading {
  std::string node;
  pid_t pid = 0;
  std::optional<int> rank;
  // "waiting" (on peers, nothing completed), "progressing" (a collective completed: its group's
  // sequence number advanced, or it left its wait), "working" (in no wait on peers), "undecided"
  // (on CPU inside a wait, nothing to tell), "exited"
  std::string state;
  std::string where;     // the wait point, for people ("barrier (torch/…:3145) <- main (x.py:9)")
  std::string evidence;  // the progress evidence, for people
  std::optional<std::uint64_t> sequence;  // the highest sequence number among its groups
  std::string exit;                       // for an exited rank: its exit when known
  // Alive and standing still: no CPU, the same stack, nothing completed (also inside a call
  // the Python frames do not name, such as a C++ store.wait() made from user code).
  bool still = false;
};

// One job in one poll.
struct JobPoll {
  std::string job;                 // its key (MASTER_ADDR:MASTER_PORT, a group's store key)
  std::string label;               // for people: "job 10.0.0.1:29500", "DP group …"
  std::int64_t unix_ns = 0;        // the poll's first read (coordinator clock)
  std::int64_t until_unix_ns = 0;  // its last read
  bool progressed = false;         // a collective of the job completed during the poll
  // The shortest collective timeout among its ranks' groups (read from their memory), if any.
  std::optional<std::int64_t> timeout_ms;
  std::vector<RankReading> ranks;
  int waiting() const;
  int progressing() const;
  int alive() const;  // ranks not exited
};

// The polls of one bundle: every node's [previous last read,] first read and last read of this
// poll, as samples (watch's source makes it). Jobs without a live rank are left out.
std::vector<JobPoll> read_polls(const model::Bundle& bundle);

// What the tracker tells its caller after a poll.
struct JobEvent {
  enum class Kind {
    kSuspect,   // waiting ranks and no completion for the required time: confirm it
    kRankDead,  // a rank exited while peers of its job wait (still so one poll later)
  };
  Kind kind = Kind::kSuspect;
  std::string job;
  std::string label;
  std::int64_t stalled_since_ns = 0;  // kSuspect: the first poll of the stall
  RankReading dead;                   // kRankDead: the rank that exited
  std::vector<RankReading> waiting;   // the ranks that wait meanwhile
};

// The state of every job across polls.
class JobTracker {
 public:
  // `after`: a stall this long makes a job suspect (doubled after each suspicion the samples
  // cleared, until the job progresses again); unless `after_given`, half the job's collective
  // timeout when that is shorter and known. `history`: polls kept per job for watch.json.
  JobTracker(std::chrono::nanoseconds after, bool after_given = true, std::size_t history = 150);

  // Takes one poll's jobs; jobs not in it any more are dropped (they ended). Returns the jobs
  // to confirm (suspects) and the ranks that exited while their peers wait.
  std::vector<JobEvent> update(const std::vector<JobPoll>& polls);

  // The caller confirmed a suspicion (an incident was written) or the samples cleared it.
  void incident(const std::string& job);
  void cleared(const std::string& job);

  // For metrics and the status line: per job, seconds without a completion while ranks wait
  // (0 when none wait), waiting and progressing ranks.
  struct Reading {
    std::string job;
    std::string label;
    double seconds_stalled = 0;
    int waiting = 0;
    int progressing = 0;
    int alive = 0;
    bool incident_open = false;
  };
  std::vector<Reading> readings(std::int64_t now_ns) const;

  // The polls kept for `job`, oldest first (watch.json's observations).
  const std::deque<JobPoll>* history(const std::string& job) const;

 private:
  struct State {
    std::string label;
    std::optional<std::int64_t> stalled_since;  // first poll with waiting ranks, no completion
    std::chrono::nanoseconds after{0};          // its --after (or half its collective timeout)
    std::chrono::nanoseconds required{0};       // the stall that makes it suspect now
    bool incident_open = false;  // an incident was written: none again until it progresses
    std::set<std::pair<std::string, pid_t>> dead_told;  // ranks already reported exited
    // Ranks that exited in a recent poll, with the polls seen since: told once their peers stand
    // still in a later poll, forgotten after a few polls of peers that move on.
    std::vector<std::pair<RankReading, int>> dead_pending;
    std::deque<JobPoll> history;
  };
  std::chrono::nanoseconds after_;
  bool after_given_;
  std::size_t history_size_;
  std::map<std::string, State> jobs_;
};

}  // namespace hangscope::watch
