// A client of NCCL's RAS service (NCCL >= 2.24): the text protocol on localhost:28028 (or
// NCCL_RAS_ADDR) that NCCL's own ncclras client speaks — CLIENT PROTOCOL, TIMEOUT, SET FORMAT
// json, STATUS — with every step bounded in time, run inside the rank's network namespace.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hangscope/model/fact_keys.h"

namespace hangscope::collectives {

struct RasEndpoint {
  std::string host = "127.0.0.1";
  int port = 28028;
  std::string text() const;  // "127.0.0.1:28028"
};

// NCCL_RAS_ADDR ("host:port", "[v6]:port") from the rank's environment, else localhost:28028.
RasEndpoint ras_endpoint(const std::map<std::string, std::string>& env);

struct RasReply {
  std::string server_protocol;  // what "SERVER PROTOCOL n" said
  std::string format;           // json | text: what the report came in
  std::string report;           // the STATUS output (capped at 1 MiB)
  std::string error;            // why there is no (complete) report; "" on success
};

// A rank's RAS result is kept under the facts model::fact_keys::kNcclRas (for people: describe(),
// or why RAS could not be asked) and kNcclRasStatus (for code: to_string(RasStatus)); the report
// itself under kNcclRasReport on the first rank of a network namespace.

// What a STATUS report says, for people: one finding per problem (op counts that differ,
// missing or dead ranks with their process and node), from the JSON or the text format.
struct RasSummary {
  int communicators = 0;
  int ranks = 0;
  std::vector<std::string> findings;  // empty: RAS saw nothing wrong (which is no proof)
  std::string describe() const;       // "ok: 1 communicator, 7 ranks" or "problems: …"
  model::RasStatus status() const {
    return findings.empty() ? model::RasStatus::kOk : model::RasStatus::kProblems;
  }
};
RasSummary summarize_ras(const RasReply& reply);

// Connects (in the network namespace of `netns_pid` when non-zero), shakes hands, asks for
// JSON (falls back to text when refused), sends STATUS and reads until the server closes.
// `timeout` bounds the whole exchange; `nccl_timeout_seconds` is sent as TIMEOUT (how long
// NCCL waits for its peers).
RasReply query_ras(const RasEndpoint& endpoint, std::chrono::milliseconds timeout,
                   int nccl_timeout_seconds = 5, int netns_pid = 0);

}  // namespace hangscope::collectives
