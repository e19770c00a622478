// Fuzz target: JSON snapshot files (`hangscope diagnose node0.json`: what `collect --once -o`
// writes, and the snapshots of bundles of up to 16 nodes). Feeds the text of a .json file
// (protobuf's JSON mapping of a v1::SnapshotFile) to snapshot::parse_file (JSON parse, then
// snapshot::decode of every NodeSnapshot: schema, string and stack tables, the flight-recorder
// JSON inside), then runs what diagnose runs on them: analysis, the built-in signature rules,
// report.json, report.md, tree.dot, stacks.folded and the terminal summary.
#include "fuzz_support.h"
#include "hangscope/common/error.h"
#include "hangscope/snapshot/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hangscope;
  try {  // diagnose reports a hangscope::Error as a failure with its message: a clean refusal
    fuzz::diagnose(snapshot::parse_file(fuzz::input(data, size), false, "fuzz.json"));
  } catch (const Error&) {
  }
  return 0;
}
