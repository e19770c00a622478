// Facts about a node's GPUs, a rank's network and its caches: the GPU parsers on outputs
// recorded as nvidia-smi and the driver print them (no GPU here), /proc/net parsers on kernel
// rows, a real process's own sockets, and vLLM's torch.compile and P2P caches on disk.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "fixtures.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/facts/caches.h"
#include "hangscope/facts/gpu.h"
#include "hangscope/facts/network.h"
#include "hangscope/model/connections.h"
#include "target_process.h"

namespace hangscope::facts {
namespace {

// Outputs recorded from real machines, and their /proc and sysfs trees (tests/fixtures/gpu).
std::string gpu_fixture(const std::string& name) {
  return testing::fixture_text("gpu/" + name);
}

std::string gpu_root(const std::string& name) {
  return testing::fixture_path("gpu/" + name);
}

TEST(Gpu, QueryOfAnEightGpuNode) {
  const auto gpus = parse_nvidia_smi_query(gpu_fixture("dgx-h100.query.csv"));
  ASSERT_EQ(gpus.size(), 8u);
  EXPECT_EQ(gpus[0].index, 0);
  EXPECT_EQ(gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus[7].bus_id, "00000000:DB:00.0");
  EXPECT_EQ(gpus[3].compute_cap, "9.0");
  EXPECT_EQ(gpus[3].memory_total, "81559 MiB");
}

TEST(Gpu, QueryWithoutHeaderAndNotSupportedValues) {
  const auto gpus =
      parse_nvidia_smi_query("0, Tesla T4, [N/A]\n", {"index", "name", "compute_cap"});
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].name, "Tesla T4");
  EXPECT_EQ(gpus[0].compute_cap, "");
  EXPECT_THROW(parse_nvidia_smi_query("No devices were found\n"), Error);
  try {
    parse_nvidia_smi_query("index, name\n0, A, extra\n");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

TEST(Gpu, TopologyOfAnNvSwitchNode) {
  const auto m = parse_nvidia_smi_topo(gpu_fixture("dgx-h100.topo.txt"));
  ASSERT_EQ(m.devices.size(), 12u);  // 8 GPUs, 4 NICs; affinity columns are not devices
  EXPECT_EQ(m.devices[8], "NIC0");
  EXPECT_EQ(m.links[0][0], "X");
  EXPECT_EQ(m.links[0][7], "NV18");
  EXPECT_EQ(m.links[0][8], "PIX");
  EXPECT_EQ(m.nic_names.at("NIC3"), "mlx5_3");
  GpuTopology t;
  apply_nvidia_smi(t, gpu_fixture("dgx-h100.query.csv"), gpu_fixture("dgx-h100.topo.txt"));
  const auto facts = t.facts();
  EXPECT_EQ(facts.at("gpu.count"), "8");
  EXPECT_EQ(facts.at("gpu.compute_capability"), "9.0");
  EXPECT_EQ(facts.at("gpu.nvlink"), "yes");
  EXPECT_EQ(facts.at("gpu.nvswitch"), "yes");  // NVLink between all 8 GPUs
  EXPECT_EQ(facts.at("gpu.links"), "NV18 ×28 (GPU pairs)");
  const auto from_files = gpu_topology_from_files(gpu_root("root-h100"));
  EXPECT_EQ(from_files.nvswitch_devices, 4);
  EXPECT_EQ(from_files.facts().at("gpu.nvswitch"), "yes");
}

TEST(Gpu, TopologyOfAPcieOnlyNode) {
  const auto m = parse_nvidia_smi_topo(gpu_fixture("l40s-pcie.topo.txt"));
  ASSERT_EQ(m.devices.size(), 4u);
  EXPECT_EQ(m.links[0][1], "NODE");
  EXPECT_EQ(m.links[0][3], "SYS");
  EXPECT_THROW(parse_nvidia_smi_topo("NVIDIA-SMI has failed because it couldn't communicate"),
               Error);
  GpuTopology t;
  apply_nvidia_smi(t, gpu_fixture("l40s-pcie.query.csv"), gpu_fixture("l40s-pcie.topo.txt"));
  const auto facts = t.facts();
  EXPECT_EQ(facts.at("gpu.model"), "NVIDIA L40S ×4");
  EXPECT_EQ(facts.at("gpu.compute_capability"), "8.9");
  EXPECT_EQ(facts.at("gpu.nvlink"), "no");  // known false: a matrix with PCIe links only
  EXPECT_EQ(facts.at("gpu.nvswitch"), "no");
  EXPECT_EQ(facts.at("gpu.links"), "NODE ×2, SYS ×4 (GPU pairs)");
  GpuTopology broken;
  apply_nvidia_smi(broken, "garbage\n", "");
  EXPECT_NE(broken.facts().at("gpu.notes").find("nvidia-smi --query-gpu"), std::string::npos);
}

TEST(Gpu, DriverFilesAndSysfs) {
  EXPECT_EQ(parse_nvrm_version(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 2023\n"),
            "535.104.05");
  EXPECT_EQ(parse_nvrm_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                               "570.86.15  Release Build\n"),
            "570.86.15");
  const auto t = gpu_topology_from_files(gpu_root("root-h100"));
  EXPECT_EQ(t.source, "/proc/driver/nvidia");
  EXPECT_EQ(t.driver_version, "535.104.05");
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.gpus[1].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t.gpus[1].index, 1);
  const auto facts = t.facts();
  EXPECT_EQ(facts.at("gpu.count"), "2");
  EXPECT_EQ(facts.at("gpu.model"), "NVIDIA H100 80GB HBM3 ×2");
  EXPECT_FALSE(facts.count("gpu.nvlink"));  // unknown without nvidia-smi topo: not "no"
}

TEST(Gpu, NoGpuIsAFactNotAnError) {
  const auto none = gpu_topology_from_files("/nonexistent-root");
  EXPECT_EQ(none.facts().at("gpu.count"), "0");
  EXPECT_EQ(none.facts().at("gpu.source"), "none");
  const auto bus_only = gpu_topology_from_files(gpu_root("root-nodriver"));
  EXPECT_EQ(bus_only.facts().at("gpu.count"), "1");  // the Intel VGA device is not counted
  EXPECT_EQ(bus_only.source, "sysfs");
  EXPECT_NE(bus_only.facts().at("gpu.notes").find("no driver"), std::string::npos);
  // This machine has no NVIDIA driver: no nvidia-smi run, no error.
  const auto here = gpu_topology();
  EXPECT_EQ(here.facts().at("gpu.count"), "0");
}

TEST(Network, ProcNetTcpRows) {
  const std::string tcp =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        "
      "0 12345 1 0000000000000000 100 0 0 10 0\n"
      "   1: 026433C6:A2C4 016433C6:7149 01 00000400:0000001C 01:000000F6 00000005     0        "
      "0 12346 2 0000000000000000 20 4 30 10 -1\n";
  const auto rows = parse_proc_net_tcp(tcp);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].local(), "127.0.0.1:8080");
  EXPECT_EQ(rows[0].state, model::SocketState::kListen);
  EXPECT_EQ(rows[1].local(), "198.51.100.2:41668");
  EXPECT_EQ(rows[1].remote(), "198.51.100.1:29001");
  EXPECT_EQ(rows[1].state, model::SocketState::kEstablished);
  EXPECT_EQ(rows[1].inode, 12346u);
  // A connection whose link lost its traffic: 1,024 bytes unacknowledged, 5 retransmission
  // timeouts; 28 bytes not yet read.
  EXPECT_EQ(rows[1].tx_queue, 1024u);
  EXPECT_EQ(rows[1].rx_queue, 28u);
  EXPECT_EQ(rows[1].retransmits, 5u);
  EXPECT_EQ(rows[0].tx_queue, 0u);
  const std::string tcp6 =
      "  sl  local_address                         remote_address                        st "
      "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 0000000000000000FFFF00000100007F:9185 0000000000000000FFFF00000100007F:C1A2 01 "
      "00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 20 4 0 10 "
      "-1\n"
      "   1: 00000000000000000000000001000000:0016 00000000000000000000000000000000:0000 0A "
      "00000000:00000000 00:00000000 00000000     0        0 4243 1 0000000000000000 100 0 0 10 "
      "0\n";
  const auto rows6 = parse_proc_net_tcp(tcp6);
  ASSERT_EQ(rows6.size(), 2u);
  EXPECT_EQ(rows6[0].local(), "127.0.0.1:37253");  // IPv4-mapped, as IPv4
  EXPECT_EQ(rows6[1].local(), "[::1]:22");
  try {
    parse_proc_net_tcp("header\n   0: zz\n");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

TEST(Network, AddressesAndTheirInterfaces) {
  const std::string fib =
      "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n"
      "     +-- 198.51.100.0/24 2 0 2\n        |-- 198.51.100.0\n           /24 link UNICAST\n"
      "        |-- 198.51.100.2\n           /32 host LOCAL\n"
      "Local:\n  +-- 127.0.0.0/8 2 0 2\n     |-- 127.0.0.1\n        /32 host LOCAL\n"
      "     |-- 127.255.255.255\n        /32 link BROADCAST\n";
  const auto ips = local_ipv4_addresses(fib);
  EXPECT_EQ(ips, (std::vector<std::string>{"127.0.0.1", "198.51.100.2"}));
  const std::string route =
      "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
      "eth1\t00000000\t016433C6\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
      "eth1\t006433C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
  const auto owners = interfaces_of_addresses(ips, route);
  EXPECT_EQ(owners.at("198.51.100.2"), "eth1");
  EXPECT_EQ(owners.at("127.0.0.1"), "lo");
}

TEST(Network, SocketIfnameSyntax) {
  EXPECT_TRUE(interface_selected("eth0", "eth"));  // prefixes
  EXPECT_TRUE(interface_selected("eth1", "ib,eth"));
  EXPECT_FALSE(interface_selected("eth10", "=eth1"));  // exact
  EXPECT_TRUE(interface_selected("eth1", "=eth1"));
  EXPECT_FALSE(interface_selected("docker0", "^docker,lo"));  // exclusion
  EXPECT_TRUE(interface_selected("eth0", "^docker,lo"));
}

TEST(Network, ChecksAgainstTheEnvironment) {
  NetworkFacts n;
  n.interfaces = {{"lo", {"127.0.0.1"}}, {"eth0", {"198.51.100.2"}}};
  TcpSocket gloo;
  gloo.local_ip = "203.0.113.9";  // bound on an address outside eth0
  gloo.local_port = 41000;
  gloo.remote_ip = "198.51.100.1";
  gloo.remote_port = 41001;
  gloo.state = model::SocketState::kEstablished;
  TcpSocket connecting = gloo;
  connecting.local_ip = "198.51.100.2";
  connecting.remote_port = 29500;
  connecting.state = model::SocketState::kSynSent;
  n.sockets = {gloo, connecting};
  const auto facts = n.facts({{"GLOO_SOCKET_IFNAME", "eth0"},
                              {"NCCL_SOCKET_IFNAME", "ib0"},
                              {"VLLM_HOST_IP", "10.0.0.5"},
                              {"MASTER_ADDR", "198.51.100.1"},
                              {"MASTER_PORT", "29500"}});
  EXPECT_EQ(facts.at("net.GLOO_SOCKET_IFNAME").rfind("mismatch: eth0 selects eth0", 0), 0u)
      << facts.at("net.GLOO_SOCKET_IFNAME");
  EXPECT_NE(facts.at("net.GLOO_SOCKET_IFNAME").find("203.0.113.9"), std::string::npos);
  EXPECT_EQ(facts.at("net.NCCL_SOCKET_IFNAME").rfind("mismatch: ib0 names no interface", 0), 0u);
  EXPECT_EQ(facts.at("net.VLLM_HOST_IP"),
            "mismatch: 10.0.0.5 is not an address of the rank's network namespace");
  EXPECT_EQ(facts.at("net.store"), "mismatch: still connecting to the store at 198.51.100.1:29500");
  EXPECT_EQ(facts.at("net.connections"), "1 established, 1 still connecting (peers 198.51.100.1)");
  const auto recorded = model::parse_recorded_connections(facts.at("net.tcp"));
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_EQ(recorded[0].local, "203.0.113.9:41000");
  EXPECT_EQ(recorded[0].state, model::SocketState::kEstablished);
  EXPECT_EQ(recorded[1].state, model::SocketState::kSynSent);
}

TEST(Network, ARealProcessesOwnSockets) {
  // A listener and a connection to it, both in one process: both ends are its own.
  testing::TargetProcess target(
      {"/usr/bin/python3", "-c",
       "import socket,sys,time\n"
       "l=socket.socket(); l.bind(('127.0.0.1',0)); l.listen()\n"
       "c=socket.create_connection(l.getsockname()); a,_=l.accept()\n"
       "print('ready', l.getsockname()[1], c.getsockname()[1], flush=True); time.sleep(60)\n"});
  std::istringstream ready(target.wait_for_line("ready"));
  std::string word;
  int listen_port = 0, client_port = 0;
  ready >> word >> listen_port >> client_port;
  const auto n = network_facts("/proc/" + std::to_string(target.pid()));
  const auto facts =
      n.facts({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(listen_port)}});
  EXPECT_EQ(facts.at("net.listening"), "127.0.0.1:" + std::to_string(listen_port));
  EXPECT_EQ(facts.at("net.connections"), "2 established (peers 127.0.0.1)");
  const std::string out =
      "127.0.0.1:" + std::to_string(client_port) + ">127.0.0.1:" + std::to_string(listen_port);
  EXPECT_NE(facts.at("net.tcp").find(out), std::string::npos) << facts.at("net.tcp");
  EXPECT_EQ(facts.at("net.store").rfind("ok: hosts the store", 0), 0u);
  EXPECT_NE(facts.at("net.interfaces").find("lo 127.0.0.1"), std::string::npos);
  EXPECT_TRUE(network_facts("/proc/999999999").sockets.empty());
}

TEST(Caches, TorchCompileCacheIsWarmOrColdPerRank) {
  const auto root = testing::temp_path("compile");
  const std::string cache = "/v/torch_compile_cache/1a2b3c4d5e";
  std::system(
      ("mkdir -p " + root + cache + "/rank_0_0/backbone " + root + cache + "/rank_2_0/backbone")
          .c_str());
  std::ofstream(root + cache + "/rank_0_0/backbone/computation_graph.py") << "graph";
  std::ofstream(root + cache + "/rank_0_0/backbone/vllm_compile_cache.py") << "{}";
  const std::map<std::string, std::string> env = {{"VLLM_CACHE_ROOT", "/v"}};
  const auto warm = torch_compile_cache(root, env, 0, 0);
  EXPECT_EQ(warm.state, "warm");
  EXPECT_EQ(warm.files, 2u);
  EXPECT_EQ(warm.bytes, 7u);
  EXPECT_EQ(warm.other_rank_dirs, (std::set<std::string>{"rank_2_0"}));
  const auto cold = torch_compile_cache(root, env, 1, 0);
  EXPECT_EQ(cold.state, "cold");
  EXPECT_NE(cold.describe().find("no rank_1_0 directory"), std::string::npos) << cold.describe();
  EXPECT_EQ(torch_compile_cache(root, env, 2, 0).state, "cold");  // a directory without files
  EXPECT_EQ(torch_compile_cache(
                root, {{"VLLM_CACHE_ROOT", "/v"}, {"VLLM_DISABLE_COMPILE_CACHE", "1"}}, 0, 0)
                .state,
            "disabled");
  EXPECT_EQ(torch_compile_cache(root, {{"HOME", "/nobody"}}, 0, 0).state, "absent");
  std::system(("rm -rf " + root).c_str());
}

TEST(Caches, GpuP2pAccessCache) {
  const auto root = testing::temp_path("p2p");
  std::system(("mkdir -p " + root + "/v").c_str());
  std::ofstream(root + "/v/gpu_p2p_access_cache_for_0,1.json")
      << R"({"0->0": true, "0->1": true, "1->0": false, "1->1": true})";
  std::ofstream(root + "/v/unrelated.json") << "{}";
  const auto files = gpu_p2p_cache_files(root, "/v");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].p2p_false, std::vector<std::string>{"1->0"});
  EXPECT_NE(files[0].describe().find("believed available for 3 of 4 pairs, not for 1->0"),
            std::string::npos)
      << files[0].describe();
  EXPECT_EQ(vllm_cache_root({{"XDG_CACHE_HOME", "/x"}, {"HOME", "/h"}}), "/x/vllm");
  std::system(("rm -rf " + root).c_str());
}

}  // namespace
}  // namespace hangscope::facts
