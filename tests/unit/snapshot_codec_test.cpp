#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "fixtures.h"
#include "hangscope/cli/options.h"
#include "hangscope/common/error.h"
#include "hangscope/common/redaction.h"
#include "hangscope/common/text.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/report/bundle_files.h"
#include "hangscope/snapshot/codec.h"
#include "hangscope/snapshot/flight_json.h"
#include "hangscope/sources/sources.h"
#include "hangscope/v1/snapshot.pb.h"

namespace hangscope {
namespace {

model::NodeSnapshot sample_node(int ranks) {
  model::NodeSnapshot node;
  node.node_name = "node-0";
  node.hostname = "host0";
  node.capture_unix_ns = 1'700'000'000'000'000'000;
  for (int r = 0; r < ranks; ++r) {
    model::ProcessRecord p;
    p.pid = 100 + r;
    p.identity.role = model::ProcessRole::kRank;
    p.identity.rank = r;
    p.identity.job = "10.0.0.1:29500";
    p.identity.source = model::IdentitySource::kEnv;
    model::ProcessDump dump;
    model::ThreadDump thread;
    thread.tid = p.pid;
    for (int depth = 0; depth < 40; ++depth) {
      model::Frame f;
      f.kind = depth % 2 ? model::Frame::Kind::kPython : model::Frame::Kind::kNative;
      f.function = "function_" + std::to_string(depth);
      f.module = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0";
      f.file = "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py";
      f.line = depth;
      thread.frames.push_back(f);
    }
    dump.threads.push_back(thread);
    p.dump = dump;
    node.processes.push_back(p);
  }
  return node;
}

TEST(SnapshotCodec, RoundTripsAndInternsRepeatedStrings) {
  const auto node = sample_node(8);
  v1::NodeSnapshot wire;
  snapshot::encode(node, wire);
  EXPECT_EQ(wire.schema_major(), snapshot::kSchemaMajor);
  EXPECT_LT(wire.strings_size(), 50);  // 8 ranks x 40 frames share ~43 strings
  const auto back = snapshot::decode(wire);
  ASSERT_EQ(back.processes.size(), 8u);
  EXPECT_EQ(back.processes[3].identity.rank, 3);
  EXPECT_EQ(back.processes[3].dump->threads[0].frames[7].function, "function_7");
  EXPECT_EQ(back.processes[3].dump->threads[0].frames[7].file,
            "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py");
  // Interning keeps 8 deep stacks small: well under 2 KiB per rank.
  EXPECT_LT(wire.ByteSizeLong(), 8u * 2048u);
}

// The ranks of a node that stand in the same stack hold one decoded copy of it (the memory of
// diagnose at 32,768 ranks), and changing one thread's frames leaves the others as they were.
// Schema 2.2 carries asyncio tasks: every field comes back, and thousands of tasks suspended in
// the same coroutines send that chain once.
// The role travels typed (field 14 of RankIdentity, schema 2.4) and as text; a file written before
// the typed field has the text only, from which the reader derives the role once.
TEST(SnapshotCodec, TheRoleTravelsTypedAndOlderFilesDeriveItFromTheText) {
  auto node = sample_node(2);
  node.processes[1].identity.role = model::ProcessRole::kEngine;
  v1::NodeSnapshot wire;
  snapshot::encode(node, wire);
  ASSERT_EQ(wire.processes_size(), 2);
  EXPECT_EQ(wire.processes(1).identity().role(), "engine");
  EXPECT_EQ(wire.processes(1).identity().role_kind(), v1::PROCESS_ROLE_ENGINE);
  EXPECT_EQ(snapshot::decode(wire).processes[1].identity.role, model::ProcessRole::kEngine);
  // An older writer: the text only.
  for (auto& p : *wire.mutable_processes()) p.mutable_identity()->clear_role_kind();
  wire.mutable_processes(1)->mutable_identity()->set_role("launcher");
  const auto old = snapshot::decode(wire);
  EXPECT_EQ(old.processes[0].identity.role, model::ProcessRole::kRank);
  EXPECT_EQ(old.processes[1].identity.role, model::ProcessRole::kLauncher);
  wire.mutable_processes(1)->mutable_identity()->set_role("a role no version wrote");
  EXPECT_EQ(snapshot::decode(wire).processes[1].identity.role, model::ProcessRole::kUnidentified);
}

// Schema 2.4 writes the identity source as an enum beside its text; a file with the text alone
// (2.3 and older) is read by the text, and an enum this reader knows wins over the text.
TEST(SnapshotCodec, TheIdentitySourceTravelsAsAnEnumAndItsText) {
  auto node = sample_node(3);
  node.processes[1].identity.source = model::IdentitySource::kMemoryInitArguments;
  node.processes[2].identity.source = model::IdentitySource::kFlightRecorder;
  v1::NodeSnapshot wire;
  snapshot::encode(node, wire);
  EXPECT_EQ(wire.processes(1).identity().source(), "memory:init-arguments");
  EXPECT_EQ(wire.processes(1).identity().source_kind(), v1::IDENTITY_SOURCE_MEMORY_INIT_ARGUMENTS);
  auto back = snapshot::decode(wire);
  EXPECT_EQ(back.processes[0].identity.source, model::IdentitySource::kEnv);
  EXPECT_EQ(back.processes[2].identity.source, model::IdentitySource::kFlightRecorder);

  for (auto& p : *wire.mutable_processes()) p.mutable_identity()->clear_source_kind();
  wire.mutable_processes(0)->mutable_identity()->set_source("memory:process-group");
  back = snapshot::decode(wire);
  EXPECT_EQ(back.processes[0].identity.source, model::IdentitySource::kMemoryProcessGroup);
  EXPECT_EQ(back.processes[1].identity.source, model::IdentitySource::kMemoryInitArguments);
  wire.mutable_processes(0)->mutable_identity()->set_source("a-newer-source");
  EXPECT_EQ(snapshot::decode(wire).processes[0].identity.source, model::IdentitySource::kOther);
  EXPECT_EQ(model::to_string(model::IdentitySource::kNone), "");
}

model::FlightRecord record_in_states(const std::vector<model::FlightState>& states) {
  model::FlightRecord record;
  record.groups["0"].ranks = {0, 1};
  for (const auto state : states) {
    model::FlightEntry e;
    e.pg = "0";
    e.collective_seq_id = static_cast<std::int64_t>(record.entries.size()) + 1;
    e.profiling_name = "nccl:all_reduce";
    e.state = state;
    record.entries.push_back(e);
  }
  return record;
}

std::vector<model::FlightState> entry_states(const model::NodeSnapshot& node) {
  std::vector<model::FlightState> out;
  for (const auto& e : node.processes.at(0).flight_record.value().entries) out.push_back(e.state);
  return out;
}

// Schema 2.5 writes a flight entry's state as an enum beside its text; an entry with the text
// alone (2.4 and older) is read by the text, and an enum this reader knows wins over the text.
TEST(SnapshotCodec, TheFlightEntryStateTravelsTypedAndOlderFilesDeriveItFromTheText) {
  const std::vector<model::FlightState> states = {
      model::FlightState::kScheduled, model::FlightState::kStarted, model::FlightState::kCompleted,
      model::FlightState::kUnknown};
  auto node = sample_node(1);
  node.processes[0].flight_record = record_in_states(states);
  v1::NodeSnapshot wire;
  snapshot::encode(node, wire);
  const auto& entries = wire.processes(0).flight().entries();
  ASSERT_EQ(entries.size(), 4);
  EXPECT_EQ(entries[0].state(), "scheduled");
  EXPECT_EQ(entries[0].state_kind(), v1::FLIGHT_STATE_SCHEDULED);
  EXPECT_EQ(entries[1].state(), "started");
  EXPECT_EQ(entries[1].state_kind(), v1::FLIGHT_STATE_STARTED);
  EXPECT_EQ(entries[2].state(), "completed");
  EXPECT_EQ(entries[2].state_kind(), v1::FLIGHT_STATE_COMPLETED);
  EXPECT_EQ(entries[3].state(), "");
  EXPECT_EQ(entries[3].state_kind(), v1::FLIGHT_STATE_UNSPECIFIED);
  EXPECT_EQ(entry_states(snapshot::decode(wire)), states);

  // An older writer: the text only.
  for (auto& e : *wire.mutable_processes(0)->mutable_flight()->mutable_entries()) {
    e.clear_state_kind();
  }
  EXPECT_EQ(entry_states(snapshot::decode(wire)), states);
  wire.mutable_processes(0)->mutable_flight()->mutable_entries(0)->set_state("retired");
  EXPECT_EQ(entry_states(snapshot::decode(wire))[0], model::FlightState::kUnknown);
  // Both: the enum decides.
  wire.mutable_processes(0)->mutable_flight()->mutable_entries(0)->set_state_kind(
      v1::FLIGHT_STATE_COMPLETED);
  EXPECT_EQ(entry_states(snapshot::decode(wire))[0], model::FlightState::kCompleted);
}

// A snapshot file of schema 2.4, as that version wrote it (protobuf's JSON mapping, states as
// text only), reads with its states typed.
constexpr char kSchema24File[] = R"({"snapshots": [{
  "schemaMajor": 2, "schemaMinor": 4, "nodeName": "node-0", "hostname": "host0",
  "strings": [""],
  "processes": [{
    "pid": 100,
    "identity": {"role": "rank", "rank": 0, "source": "env"},
    "flight": {"path": "/tmp/nccl_trace_rank_0", "format": "pickle", "fresh": true,
               "groups": [{"id": "0", "ranks": [0, 1]}],
               "entries": [{"pg": "0", "collectiveSeqId": "1", "state": "completed"},
                           {"pg": "0", "collectiveSeqId": "2", "state": "started"},
                           {"pg": "0", "collectiveSeqId": "3", "state": "scheduled"}]},
    "sockets": [{"family": "UNIX", "fd": 5, "inode": "4100", "type": "stream",
                 "state": "unconnected"},
                {"family": "TCP", "fd": 7, "inode": "4200", "type": "stream",
                 "state": "syn-sent", "local": "10.0.0.1:41000", "remote": "10.0.0.2:5555"},
                {"family": "TCP", "fd": 8, "inode": "4201", "type": "stream",
                 "state": "listen", "local": "10.0.0.1:5555", "remote": "0.0.0.0:0"}]
  }]
}]})";

TEST(SnapshotSchema, AFileOfSchema2_4ReadsItsStatesFromTheText) {
  const std::string path = ::testing::TempDir() + "schema-2.4.json";
  {
    std::ofstream out(path);
    out << kSchema24File;
  }
  const auto nodes = snapshot::read_file(path);
  std::remove(path.c_str());
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(
      entry_states(nodes[0]),
      (std::vector<model::FlightState>{model::FlightState::kCompleted, model::FlightState::kStarted,
                                       model::FlightState::kScheduled}));
  const auto& sockets = nodes[0].processes.at(0).dump.value().sockets;
  ASSERT_EQ(sockets.size(), 3u);
  EXPECT_EQ(sockets[0].state, model::SocketState::kClose);
  EXPECT_EQ(sockets[0].state_name(), "unconnected");
  EXPECT_EQ(sockets[1].state, model::SocketState::kSynSent);
  EXPECT_EQ(sockets[2].state, model::SocketState::kListen);
}

TEST(SnapshotCodec, AsyncioTasksRoundTripWithSharedCoroutineChains) {
  auto node = sample_node(1);
  auto& dump = *node.processes[0].dump;
  model::Frame wait;
  wait.kind = model::Frame::Kind::kPython;
  wait.function = "get";
  wait.qualname = "Queue.get";
  wait.file = "/usr/lib/python3.11/asyncio/queues.py";
  wait.line = 158;
  model::Frame handler = wait;
  handler.function = handler.qualname = "create_chat_completion";
  handler.file = "/usr/lib/python3/dist-packages/vllm/entrypoints/openai/api_server.py";
  handler.line = 512;
  for (int i = 0; i < 3000; ++i) {
    model::AsyncTask task;
    task.address = 0x7f0000001000 + 0x100 * static_cast<std::uint64_t>(i);
    task.loop = 0x7f00000a0000;
    task.tid = 100;
    task.name = "Task-" + std::to_string(i + 2);
    task.coroutine = std::vector<model::Frame>{wait, handler};
    task.awaits = "Queue.get";
    dump.tasks.push_back(task);
  }
  model::AsyncTask odd;
  odd.address = 0x7f0000000800;
  odd.name = "bad \xff name";
  odd.state = model::AsyncTask::State::kCancelled;
  odd.eager = true;
  odd.running = true;
  odd.awaited_task = dump.tasks[5].address;
  odd.notes = {"unreadable task state"};
  dump.tasks.push_back(odd);

  v1::NodeSnapshot wire;
  snapshot::encode(node, wire);
  EXPECT_EQ(wire.schema_minor(), snapshot::kSchemaMinor);
  // 3,000 tasks in one chain: about 45 bytes a task (addresses, name, awaits), the chain once.
  EXPECT_LT(wire.ByteSizeLong(), 3000u * 50u);
  EXPECT_EQ(wire.stacks_size(), 2);  // the thread's stack and the tasks' chain
  const auto back = snapshot::decode(wire);
  const auto& tasks = back.processes.at(0).dump->tasks;
  ASSERT_EQ(tasks.size(), 3001u);
  EXPECT_EQ(tasks[7].name, "Task-9");
  EXPECT_EQ(tasks[7].tid, 100);
  EXPECT_EQ(tasks[7].loop, 0x7f00000a0000u);
  EXPECT_EQ(tasks[7].coroutine, dump.tasks[7].coroutine);
  EXPECT_EQ(tasks[7].awaits, "Queue.get");
  EXPECT_FALSE(tasks[7].awaited_task);
  const auto& last = tasks.back();
  EXPECT_EQ(last.name, "bad \xef\xbf\xbd name");  // invalid UTF-8 replaced, not fatal
  EXPECT_EQ(last.state, model::AsyncTask::State::kCancelled);
  EXPECT_TRUE(last.eager);
  EXPECT_TRUE(last.running);
  EXPECT_FALSE(last.tid);
  EXPECT_TRUE(last.coroutine.empty());
  EXPECT_EQ(last.awaited_task, dump.tasks[5].address);
  EXPECT_EQ(last.notes, odd.notes);
}

// Schema 2.3 carries each process's sockets, in binary and in protobuf's JSON; a name that is
// not UTF-8 (paths and abstract names are any bytes) arrives replaced, not fatal.
// Schema 2.6: a group found outside torch's registry travels with where it was found, its store
// and a StatelessProcessGroup's counters; an older file's groups read as registered.
TEST(SnapshotCodec, GroupsOutsideTheRegistryRoundTripInBothFileForms) {
  auto node = sample_node(1);
  auto& dump = *node.processes[0].dump;
  model::ProcessGroupState group;
  group.name = "pg@140000";
  group.backend = "store";
  group.size = 3;
  group.group_rank = 2;
  group.registered = false;
  group.type = "StatelessProcessGroup";
  group.held_by = "self.vllm_client.communicator.group";
  group.store = "198.51.100.1:51216";
  group.store_prefixes = {"tcp://198.51.100.1:51216", "weights/"};
  group.counters = {{"broadcast_send", 8}, {"send_dst/1", 3}};
  dump.distributed.emplace();
  dump.distributed->groups.push_back(group);
  for (const char* name : {"groups.pb", "groups.json"}) {
    const std::string path = ::testing::TempDir() + name;
    snapshot::write_file(path, std::vector<model::NodeSnapshot>{node});
    const auto back = snapshot::read_file(path);
    std::remove(path.c_str());
    ASSERT_EQ(back.size(), 1u);
    const auto& groups = back[0].processes.at(0).dump->distributed->groups;
    ASSERT_EQ(groups.size(), 1u) << name;
    auto expected = group;
    expected.address = 0;  // local to the capture: never sent
    EXPECT_EQ(groups[0], expected) << name;
  }
  v1::NodeSnapshot wire;
  snapshot::encode(node, wire);
  wire.mutable_processes(0)->mutable_distributed()->mutable_groups(0)->clear_unregistered();
  EXPECT_TRUE(snapshot::decode(wire).processes.at(0).dump->distributed->groups.at(0).registered);
}

TEST(SnapshotCodec, SocketsRoundTripInBothFileForms) {
  auto node = sample_node(1);
  auto& dump = *node.processes[0].dump;
  model::Socket listener;
  listener.fd = 5;
  listener.inode = 4100;
  listener.type = "stream";
  listener.state = model::SocketState::kListen;
  listener.path = "/tmp/8ccf1efe-8df7";
  model::Socket accepted = listener;
  accepted.fd = 9;
  accepted.inode = 4101;
  accepted.state = model::SocketState::kEstablished;
  accepted.path = "@odd\xff";
  accepted.peer_inode = 4102;
  model::Socket tcp;
  tcp.family = model::Socket::Family::kTcp;
  tcp.fd = 12;
  tcp.inode = 4200;
  tcp.type = "stream";
  tcp.state = model::SocketState::kEstablished;
  tcp.local = "[2001:db8::1]:5555";
  tcp.remote = "[2001:db8::2]:41000";
  dump.sockets = {listener, accepted, tcp};
  for (const char* name : {"sockets.pb", "sockets.json"}) {
    const std::string path = ::testing::TempDir() + name;
    snapshot::write_file(path, std::vector<model::NodeSnapshot>{node});
    const auto back = snapshot::read_file(path);
    std::remove(path.c_str());
    ASSERT_EQ(back.size(), 1u);
    const auto& sockets = back[0].processes.at(0).dump->sockets;
    ASSERT_EQ(sockets.size(), 3u) << name;
    EXPECT_EQ(sockets[0], listener) << name;
    EXPECT_EQ(sockets[1].path, "@odd\xef\xbf\xbd") << name;
    EXPECT_EQ(sockets[1].peer_inode, 4102u) << name;
    EXPECT_EQ(sockets[2], tcp) << name;
  }
  // Schema 2.6: the state as the kernel's number beside its name for the family; an older
  // writer's text alone reads the same.
  v1::NodeSnapshot wire;
  snapshot::encode(node, wire);
  const auto& sent = wire.processes(0).sockets();
  ASSERT_EQ(sent.size(), 3);
  EXPECT_EQ(sent[0].state(), "listen");
  EXPECT_EQ(sent[0].state_kind(), v1::SOCKET_STATE_LISTEN);
  EXPECT_EQ(sent[1].state(), "connected");
  EXPECT_EQ(sent[1].state_kind(), v1::SOCKET_STATE_ESTABLISHED);
  EXPECT_EQ(sent[2].state(), "established");
  EXPECT_EQ(sent[2].state_kind(), v1::SOCKET_STATE_ESTABLISHED);
  for (auto& s : *wire.mutable_processes(0)->mutable_sockets()) s.clear_state_kind();
  const auto old = snapshot::decode(wire).processes.at(0).dump->sockets;
  ASSERT_EQ(old.size(), 3u);
  EXPECT_EQ(old[0].state, model::SocketState::kListen);
  EXPECT_EQ(old[1].state, model::SocketState::kEstablished);
  EXPECT_EQ(old[2].state, model::SocketState::kEstablished);
  // A name no version writes reads as unknown; with both, the enum decides.
  auto& first = *wire.mutable_processes(0)->mutable_sockets(0);
  first.set_state("bound");
  EXPECT_EQ(snapshot::decode(wire).processes.at(0).dump->sockets[0].state,
            model::SocketState::kUnknown);
  first.set_state_kind(v1::SOCKET_STATE_SYN_SENT);
  EXPECT_EQ(snapshot::decode(wire).processes.at(0).dump->sockets[0].state,
            model::SocketState::kSynSent);
}

TEST(SnapshotCodec, DecodedThreadsShareOneCopyOfAStackUntilChanged) {
  v1::NodeSnapshot wire;
  snapshot::encode(sample_node(4), wire);
  auto back = snapshot::decode(wire);
  auto& first = back.processes[0].dump->threads[0];
  const auto& second = back.processes[1].dump->threads[0];
  EXPECT_TRUE(first.frames.shares(second.frames));
  first.frames.edit([](auto& frames) { frames[0].function = "changed"; });
  EXPECT_FALSE(first.frames.shares(second.frames));
  EXPECT_EQ(first.frames[0].function, "changed");
  EXPECT_EQ(second.frames[0].function, "function_0");
  EXPECT_EQ(back.processes[2].dump->threads[0].frames[0].function, "function_0");
}

TEST(SnapshotCodec, RefusesNewerMajorAndBadIndices) {
  v1::NodeSnapshot wire;
  snapshot::encode(sample_node(1), wire);
  wire.set_schema_major(snapshot::kSchemaMajor + 1);
  try {
    snapshot::decode(wire);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is newer than this hangscope reads"), std::string::npos);
  }
  wire.set_schema_major(snapshot::kSchemaMajor);
  ASSERT_GT(wire.stacks_size(), 0);
  auto bad_string = wire;
  bad_string.mutable_stacks(0)->mutable_frames(0)->set_function(9999);
  EXPECT_THROW(snapshot::decode(bad_string), Error);
  auto bad_stack = wire;
  bad_stack.mutable_processes(0)->mutable_threads(0)->set_native_stack(
      static_cast<std::uint32_t>(wire.stacks_size()) + 1);
  try {
    snapshot::decode(bad_stack);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not in its stack table"), std::string::npos);
  }
}

// A snapshot file kept as schema 2.0 wrote it (tests/fixtures/snapshots/README.md): two nodes,
// three samples, four ranks of one job, every rank's flight record as JSON text in field 20.
// A newer hangscope reads it and reaches the verdict it was written for.
const std::string kSchema20File =
    testing::fixture_path("snapshots/schema-2.0-flight-record-as-json.pb");

TEST(SnapshotSchema, AFileOfSchema2_0IsReadAndDiagnosed) {
  const auto nodes = snapshot::read_file(kSchema20File);
  ASSERT_EQ(nodes.size(), 6u);
  model::Bundle bundle;
  for (const auto& node : nodes) {
    for (const auto& p : node.processes) {
      ASSERT_TRUE(p.flight_record) << node.node_name << " pid " << p.pid;
      EXPECT_EQ(p.flight_record->error, "");
      EXPECT_FALSE(p.flight_record->entries.empty());
    }
    bundle.snapshots.push_back(node);
  }
  const model::ProcessRecord* rank2 = nullptr;
  for (const auto& node : nodes) {
    for (const auto& p : node.processes) {
      if (p.identity.rank == 2) rank2 = &p;
    }
  }
  ASSERT_NE(rank2, nullptr);
  EXPECT_EQ(rank2->flight_record->groups.at("0").last_enqueued, 5);
  EXPECT_EQ(rank2->facts.at("version.torch"), "2.5.1");
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_EQ(a.verdicts[0].id, "collective-behind");
  EXPECT_EQ(a.verdicts[0].diverged_ranks.list(), std::vector<int>{2});
}

// A bundle `diagnose -o` wrote with schema 2.0 (snapshots as protobuf JSON, the flight record as
// text in `flight_record`): `report` reads it and reaches the same verdict.
TEST(SnapshotSchema, ABundleOfSchema2_0IsReadAndDiagnosed) {
  const auto bundle = sources::from_bundle_dir(testing::fixture_path("bundles/schema-2.0-behind"));
  ASSERT_EQ(bundle.snapshots.size(), 6u);
  ASSERT_EQ(bundle.nodes.size(), 2u);
  for (const auto& node : bundle.snapshots) {
    for (const auto& p : node.processes) {
      ASSERT_TRUE(p.flight_record);
      EXPECT_EQ(p.flight_record->error, "");
    }
  }
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_EQ(a.verdicts[0].id, "collective-behind");
  EXPECT_EQ(a.verdicts[0].diverged_ranks.list(), std::vector<int>{2});
}

// Schema 2.1 sends the flight record as a FlightRecord message, never as text; what a 2.0 file
// held comes back the same through 2.1.
TEST(SnapshotSchema, TheFlightRecordTravelsAsAMessage) {
  const auto old = snapshot::read_file(kSchema20File);
  v1::NodeSnapshot wire;
  snapshot::encode(old.at(0), wire);
  EXPECT_EQ(wire.schema_major(), 2u);
  EXPECT_EQ(wire.schema_minor(), snapshot::kSchemaMinor);
  ASSERT_GT(wire.processes_size(), 0);
  for (const auto& p : wire.processes()) {
    EXPECT_TRUE(p.has_flight());
    EXPECT_TRUE(p.flight_record().empty());
  }
  const auto back = snapshot::decode(wire);
  ASSERT_EQ(back.processes.size(), old[0].processes.size());
  for (std::size_t i = 0; i < back.processes.size(); ++i) {
    EXPECT_EQ(snapshot::flight_record_to_json(*back.processes[i].flight_record),
              snapshot::flight_record_to_json(*old[0].processes[i].flight_record));
  }
  // Both fields present (a writer in between): the message wins over the text.
  auto both = wire;
  both.mutable_processes(0)->set_flight_record("{not json");
  EXPECT_EQ(snapshot::decode(both).processes[0].flight_record->error, "");
  // Text that is no record (schema 2.0) is named, not fatal.
  auto text = wire;
  text.mutable_processes(0)->clear_flight();
  text.mutable_processes(0)->set_flight_record("{not json");
  const auto unreadable = snapshot::decode(text).processes[0].flight_record;
  ASSERT_TRUE(unreadable);
  EXPECT_EQ(unreadable->error.rfind("unreadable in the snapshot: ", 0), 0u);
}

// Ranks of a node share stacks, node-wide facts and log lines: each goes over the wire once,
// and every process gets them back.
TEST(SnapshotCodec, SharedStacksFactsAndLogLinesAreSentOnceAndRestored) {
  auto node = sample_node(1);
  ASSERT_FALSE(node.processes.empty());
  auto copy = node.processes.front();
  copy.pid += 1;
  node.processes.push_back(copy);
  for (auto& p : node.processes) {
    p.facts["gpu.count"] = "0";
    p.logs.push_back({"/var/log/job.log", {"shared line", "another"}});
  }
  node.processes.back().facts["only.here"] = "x";
  v1::NodeSnapshot wire;
  snapshot::encode(node, wire);
  EXPECT_EQ(wire.common_facts().at("gpu.count"), "0");
  EXPECT_EQ(wire.processes(0).facts().count("gpu.count"), 0u);
  EXPECT_EQ(wire.processes(1).facts().at("only.here"), "x");
  const auto& t0 = wire.processes(0).threads(0);
  const auto& t1 = wire.processes(1).threads(0);
  EXPECT_NE(t0.merged_stack(), 0u);
  EXPECT_EQ(t0.merged_stack(), t1.merged_stack());
  EXPECT_EQ(wire.stacks_size(), 1);
  const auto back = snapshot::decode(wire);
  ASSERT_EQ(back.processes.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.processes[i].facts, node.processes[i].facts);
    EXPECT_EQ(back.processes[i].logs.back().lines, node.processes[i].logs.back().lines);
    ASSERT_TRUE(back.processes[i].dump);
    EXPECT_EQ(back.processes[i].dump->threads.front().frames,
              node.processes[i].dump->threads.front().frames);
    EXPECT_EQ(back.processes[i].dump->threads.front().native_frames,
              node.processes[i].dump->threads.front().native_frames);
  }
}

// A node of `ranks` processes that repeat one another as a job's ranks do: the same deep stack
// (one recursion frame thousands of times), facts, sockets and log lines.
model::NodeSnapshot repeating_node(const std::string& name, int ranks, int depth) {
  model::NodeSnapshot node;
  node.node_name = name;
  node.hostname = name;
  for (int r = 0; r < ranks; ++r) {
    model::ProcessRecord p;
    p.pid = 100 + r;
    p.identity.role = model::ProcessRole::kRank;
    p.identity.rank = r;
    p.facts["version.torch"] = "1.13.0";
    p.facts["net.tcp"] = "127.0.0.1:1>127.0.0.1:2";
    p.logs.push_back({"/var/log/job.log", {"NCCL INFO init", "waiting"}});
    model::ProcessDump dump;
    model::Socket socket;
    socket.family = model::Socket::Family::kTcp;
    socket.inode = 7;
    socket.fd = 3;
    socket.local = "127.0.0.1:1";
    socket.remote = "127.0.0.1:2";
    dump.sockets = std::vector<model::Socket>{socket};
    model::ThreadDump thread;
    thread.tid = p.pid;
    model::Frame recurse;
    recurse.kind = model::Frame::Kind::kPython;
    recurse.function = "recurse";
    recurse.file = "/srv/deep.py";
    recurse.line = 21;
    std::vector<model::Frame> frames(static_cast<std::size_t>(depth), recurse);
    frames.back().function = "main";
    thread.python_frames = frames;
    thread.frames = thread.python_frames;
    dump.threads.push_back(thread);
    p.dump = dump;
    node.processes.push_back(p);
  }
  return node;
}

// Decoded through one interner, what ranks, samples and files repeat is held once: a frame
// that recurs in a stack, the stack of every rank and of both files, the facts, sockets and log
// lines; a change to one process's copy leaves the others alone. Both file forms, and the
// decoded snapshots are the ones encoded.
TEST(SnapshotCodec, FilesReadThroughOneInternerShareWhatTheyRepeat) {
  for (const char* suffix : {".pb", ".json"}) {
    SCOPED_TRACE(suffix);
    const auto a = repeating_node("node-a", 3, 500);
    const auto b = repeating_node("node-b", 2, 500);
    const std::string file_a = ::testing::TempDir() + "interned-a" + suffix;
    const std::string file_b = ::testing::TempDir() + "interned-b" + suffix;
    snapshot::write_file(file_a, {a, a});  // two samples
    snapshot::write_file(file_b, std::vector<model::NodeSnapshot>{b});
    snapshot::Interner interner;
    auto from_a =
        snapshot::read_file(file_a, kDefaultMaxInputBytes, Links::kFollow, nullptr, &interner);
    const auto from_b =
        snapshot::read_file(file_b, kDefaultMaxInputBytes, Links::kFollow, nullptr, &interner);
    std::remove(file_a.c_str());
    std::remove(file_b.c_str());
    ASSERT_EQ(from_a.size(), 2u);
    ASSERT_EQ(from_b.size(), 1u);
    auto& first = from_a[0].processes[0];
    const auto& stack = first.dump->threads[0].python_frames;
    ASSERT_EQ(stack.size(), 500u);
    EXPECT_EQ(&stack[0], &stack[498]);  // one frame, 499 times
    EXPECT_NE(&stack[0], &stack[499]);
    EXPECT_EQ(stack[499].function, "main");
    for (const model::NodeSnapshot* node :
         std::vector<const model::NodeSnapshot*>{&from_a[0], &from_a[1], &from_b[0]}) {
      for (const auto& p : node->processes) {
        const auto& t = p.dump->threads[0];
        EXPECT_TRUE(t.python_frames.shares(stack)) << node->node_name << " " << p.pid;
        EXPECT_TRUE(t.frames.shares(stack));
        EXPECT_TRUE(p.facts.shares(first.facts));
        EXPECT_TRUE(p.dump->sockets.shares(first.dump->sockets));
        EXPECT_TRUE(p.logs[0].lines.shares(first.logs[0].lines));
      }
    }
    // What was encoded comes back.
    for (std::size_t i = 0; i < a.processes.size(); ++i) {
      const auto& want = a.processes[i];
      const auto& got = from_a[1].processes[i];
      EXPECT_EQ(got.facts, want.facts);
      EXPECT_EQ(got.logs[0].lines, want.logs[0].lines);
      EXPECT_EQ(got.dump->sockets, want.dump->sockets);
      EXPECT_EQ(got.dump->threads[0].python_frames, want.dump->threads[0].python_frames);
      EXPECT_EQ(got.dump->threads[0].frames, want.dump->threads[0].frames);
    }
    // One process's change is its own.
    first.facts["only.here"] = "x";
    first.dump->sockets.edit().clear();
    first.dump->threads[0].python_frames.edit([](auto& f) { f[0].line = 1; });
    const auto& second = from_a[0].processes[1];
    EXPECT_EQ(second.facts.count("only.here"), 0u);
    EXPECT_EQ(second.dump->sockets.size(), 1u);
    EXPECT_EQ(second.dump->threads[0].python_frames[0].line, 21);
    EXPECT_EQ(first.dump->threads[0].python_frames[0].line, 1);
  }
}

// A binary file cut short, anywhere, is refused with its name: never a partial snapshot.
TEST(SnapshotCodec, ABinaryFileCutShortIsRefused) {
  const auto node = repeating_node("node-a", 2, 50);
  const std::string path = ::testing::TempDir() + "cut.pb";
  snapshot::write_file(path, std::vector<model::NodeSnapshot>{node});
  std::ifstream in(path, std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), {});
  std::remove(path.c_str());
  ASSERT_GT(whole.size(), 100u);
  for (const std::size_t cut : {whole.size() - 1, whole.size() / 2, std::size_t{3}}) {
    try {
      snapshot::parse_file(whole.substr(0, cut), true, "cut.pb");
      ADD_FAILURE() << "cut at " << cut << " of " << whole.size() << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.pb"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(snapshot::parse_file(whole, true, "whole.pb").at(0).processes.size(), 2u);
}

// Bytes from a target (a local's repr, a log line, a command line) that are not UTF-8 must not
// make the snapshot unencodable: they become U+FFFD and the rest comes through.
TEST(SnapshotCodec, InvalidUtf8FromTheTargetIsReplacedNotFatal) {
  EXPECT_EQ(valid_utf8("plain"), "plain");
  EXPECT_EQ(valid_utf8("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(valid_utf8("a\xff"
                       "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(valid_utf8("\xc0\x80"), "\xef\xbf\xbd\xef\xbf\xbd");  // overlong
  EXPECT_EQ(valid_utf8("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd");  // cut short
  auto node = sample_node(1);
  node.processes[0].cmdline = "python3 \xfe\xfe";
  node.processes[0].logs.push_back({"/log", {"line \x80"}});
  node.processes[0].dump->threads[0].frames.edit([](auto& frames) {
    frames[0].locals.push_back({"blob", "b'\x9c'"});
  });
  v1::NodeSnapshot wire;
  snapshot::encode(node, wire);
  std::string bytes;
  ASSERT_TRUE(wire.SerializeToString(&bytes));
  v1::NodeSnapshot back_wire;
  ASSERT_TRUE(back_wire.ParseFromString(bytes));
  const auto back = snapshot::decode(back_wire);
  EXPECT_EQ(back.processes[0].cmdline, "python3 \xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(back.processes[0].logs.back().lines.back(), "line \xef\xbf\xbd");
}

TEST(CliOptions, Durations) {
  EXPECT_EQ(cli::parse_duration("500ms"), std::chrono::milliseconds(500));
  EXPECT_EQ(cli::parse_duration("2s"), std::chrono::milliseconds(2000));
  EXPECT_EQ(cli::parse_duration("1.5m"), std::chrono::milliseconds(90000));
  EXPECT_EQ(cli::parse_duration("3"), std::chrono::milliseconds(3000));
  EXPECT_FALSE(cli::parse_duration("3 hours"));
  EXPECT_FALSE(cli::parse_duration("-1s"));
  EXPECT_FALSE(cli::parse_duration("fast"));
}

TEST(Redaction, UrlCredentials) {
  EXPECT_EQ(mask_url_credentials("pull https://bot:s3cret@hub.example/x and ftp://a:b@h"),
            "pull https://bot:<masked>@hub.example/x and ftp://a:<masked>@h");
  EXPECT_EQ(mask_url_credentials("https://hub.example/a:b@c"), "https://hub.example/a:b@c");
  EXPECT_EQ(mask_command_line("vllm serve --hf-mirror https://u:pw@m.example"),
            "vllm serve --hf-mirror https://u:<masked>@m.example");
}

TEST(Redaction, CommandLinesAndEnvironments) {
  EXPECT_EQ(mask_command_line("vllm serve model --api-key sk-123 --port 8000 --hf-token=hf_abc"),
            "vllm serve model --api-key <masked> --port 8000 --hf-token=<masked>");
  EXPECT_EQ(mask_command_line("curl -H Bearer"), "curl -H Bearer");
  const auto env = filter_environment({{"RANK", "1"},
                                       {"HOME", "/root"},
                                       {"VLLM_API_KEY", "abc"},
                                       {"NCCL_DEBUG", "INFO"},
                                       {"HF_TOKEN", "hf_x"}});
  EXPECT_EQ(env.size(), 3u);
  EXPECT_EQ(env.at("RANK"), "1");
  EXPECT_EQ(env.at("VLLM_API_KEY"), "<masked>");
  EXPECT_EQ(env.count("HF_TOKEN"), 0u);  // not allowlisted: dropped
  EXPECT_EQ(mask_if_secret("key", "'weights/1/ready'"), "'weights/1/ready'");
  EXPECT_EQ(mask_if_secret("password", "x"), "<masked>");
}

// Token counts and ids are what a stuck request's frames are about; tokens themselves are not.
TEST(Redaction, TokenCountsAreShownAndTokensMasked) {
  for (const char* secret : {"token", "HF_TOKEN", "api_token", "hf-token", "authToken",
                             "access_token", "token_value", "VLLM_API_KEY", "db_password"}) {
    EXPECT_TRUE(is_secret_name(secret)) << secret;
  }
  for (const char* shown : {"max_tokens", "prompt_tokens", "num_tokens", "maxTokens", "tokens",
                            "tokenizer", "tokenizer_mode", "prompt_token_ids", "token_ids",
                            "num_token_count", "max_num_batched_tokens", "key", "rank"}) {
    EXPECT_FALSE(is_secret_name(shown)) << shown;
  }
  EXPECT_EQ(mask_command_line("vllm serve m --tokenizer /models/tok --max-tokens 16 --hf-token x"),
            "vllm serve m --tokenizer /models/tok --max-tokens 16 --hf-token <masked>");
}

}  // namespace
}  // namespace hangscope
