// Post-mortem diagnosis from flight-recorder dumps alone (the job is gone; sources/flight_records.h
// makes the bundle): the correlation of those dumps by what each process group as a whole shows,
// never against one reference rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hangscope/analysis/analysis.h"

namespace hangscope::analysis {

// Whether every rank of `job` is known from a flight-recorder dump only (identity source
// model::IdentitySource::kFlightRecorder, no stacks): the post-mortem correlation applies instead
// of the live one and the stack-based verdicts.
bool flight_records_only(const Job& job);

// Per process group, the group's consensus (median of the collectives issued; majority of the
// operation, sizes, dtypes and state at each sequence number) against each rank: ranks behind
// (collective-behind), ahead (collective-ahead), disagreeing (collective-mismatch), members
// without a usable dump (flight-record-missing), and every rank in one collective that none
// completed (collective-transport, no rank named). Fills each rank's `collectives` lines and the
// waiting ranks' wait-for edges.
std::vector<Verdict> postmortem_flight_verdicts(Job& job);

// The conclusion when the dumps show no hang, said plainly.
std::string postmortem_no_divergence(const std::vector<Job>& jobs);

}  // namespace hangscope::analysis
