// Fuzz target: NCCL RAS STATUS reports (what a rank's RAS service on localhost:28028 sends
// after STATUS, in the JSON format of NCCL >= 2.28.7 or the text format before it). The first
// byte picks the format the server agreed to (even: json, odd: text), the rest is the report;
// feeds it to collectives::summarize_ras and describes the summary, as the agent does.
#include "fuzz_support.h"
#include "hangscope/collectives/nccl_ras.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hangscope;
  if (size == 0) return 0;
  collectives::RasReply reply;
  reply.server_protocol = "2";
  reply.format = data[0] % 2 == 0 ? "json" : "text";
  reply.report = fuzz::input(data + 1, size - 1);
  (void)collectives::summarize_ras(reply).describe();  // never throws: problems are findings
  return 0;
}
