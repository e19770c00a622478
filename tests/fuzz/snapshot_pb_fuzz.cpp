// Fuzz target: binary snapshot files (`hangscope diagnose node0.pb`, bundles of more than 16
// nodes). Feeds the bytes of a .pb file (a v1::SnapshotFile) to snapshot::parse_file (protobuf
// parse, then snapshot::decode of every NodeSnapshot: schema, string and stack tables, the
// flight-recorder JSON inside), then runs what diagnose runs on them: analysis, the built-in
// signature rules, report.json, report.md, tree.dot, stacks.folded and the terminal summary.
#include "fuzz_support.h"
#include "hangscope/common/error.h"
#include "hangscope/snapshot/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hangscope;
  try {  // diagnose reports a hangscope::Error as a failure with its message: a clean refusal
    fuzz::diagnose(snapshot::parse_file(fuzz::input(data, size), true, "fuzz.pb"));
  } catch (const Error&) {
  }
  return 0;
}
