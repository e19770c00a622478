// Fuzz target: PyTorch flight-recorder dumps as the agent reads them from a rank's
// TORCH_NCCL_DEBUG_INFO_TEMP_FILE (the C++ pickle, or JSON). Feeds a dump's bytes to
// collectives::parse_flight_record, then puts the record through the compact JSON that travels
// in old snapshots and back (snapshot::flight_record_to_json, flight_record_from_json), and describes every entry.
#include "fuzz_support.h"
#include "hangscope/collectives/flight_recorder.h"
#include "hangscope/common/error.h"
#include "hangscope/snapshot/flight_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hangscope;
  model::FlightRecord record;
  try {
    record = collectives::parse_flight_record(fuzz::input(data, size), 8);
  } catch (const Error&) {
    return 0;
  }
  for (const auto& e : record.entries) (void)e.describe();
  // The snapshot's copy is text: dumped here, parsed by snapshot::decode.
  const auto text = snapshot::flight_record_to_json(record).dump();
  const auto back = snapshot::flight_record_from_json(nlohmann::json::parse(text));
  if (back.entries.size() != record.entries.size() || back.groups.size() != record.groups.size()) {
    __builtin_trap();  // the snapshot's copy lost entries or groups
  }
  return 0;
}
