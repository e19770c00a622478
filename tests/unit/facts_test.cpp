// Package versions from a process's own files: name normalization, version order, and
// metadata found beside the code (dist-info with METADATA, egg-info dirs and files, libnccl).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "hangscope/facts/caches.h"
#include "hangscope/facts/shm.h"
#include "hangscope/facts/versions.h"
#include "hangscope/model/package_version.h"
#include "target_process.h"

namespace hangscope::facts {
namespace {

TEST(Versions, NamesAreNormalized) {
  EXPECT_EQ(model::normalize_package_name("Flashinfer_Python"), "flashinfer-python");
  EXPECT_EQ(model::normalize_package_name("nvidia.nccl__cu12"), "nvidia-nccl-cu12");
}

TEST(Versions, OrderFollowsReleasesThenPreReleases) {
  EXPECT_LT(model::compare_versions("0.26.1rc1.dev148+g1234", "0.26.1"), 0);
  EXPECT_LT(model::compare_versions("0.26.1rc1.dev148", "0.26.1rc1.dev149"), 0);
  EXPECT_LT(model::compare_versions("0.26.1rc1.dev148", "0.26.1rc1"), 0);
  EXPECT_GT(model::compare_versions("0.27.1", "0.26.1rc1.dev148"), 0);
  EXPECT_LT(model::compare_versions("0.27.1", "0.27.2"), 0);
  EXPECT_EQ(model::compare_versions("1.13.0", "1.13"), 0);
  EXPECT_LT(model::compare_versions("1.13.0a0+gitunknown", "1.13.0"), 0);
  EXPECT_GT(model::compare_versions("0.10.0", "0.9.5"), 0);
}

TEST(Versions, FoundBesideTheFilesAProcessRuns) {
  const auto root = testing::temp_path("site");
  const std::string site = "/lib/python3.11/site-packages";
  std::system(("mkdir -p " + root + site + "/vllm/distributed " + root + site +
               "/vllm-0.27.0.dist-info " + root + site + "/torch-2.9.0.dist-info " + root + site +
               "/ray-2.49.1.egg-info " + root + site + "/requests-2.0.dist-info " + root +
               "/opt/nccl/lib")
                  .c_str());
  std::ofstream(root + site + "/vllm-0.27.0.dist-info/METADATA")
      << "Metadata-Version: 2.1\nName: vllm\nVersion: 0.27.0+cu128\n";
  std::ofstream(root + site + "/torch-2.9.0.dist-info/METADATA") << "Name: torch\n";
  std::ofstream(root + site + "/flashinfer_python-0.5.2.dist-info") << "";  // not a dir: name
  const auto versions =
      package_versions(root, {site + "/vllm/distributed/parallel_state.py",
                              "/opt/nccl/lib/libnccl.so.2.27.3", "relative/ignored.py"});
  EXPECT_EQ(versions.at("vllm"), "0.27.0+cu128");  // METADATA wins over the directory name
  EXPECT_EQ(versions.at("torch"), "2.9.0");        // no Version: line, the name tells
  EXPECT_EQ(versions.at("ray"), "2.49.1");         // egg-info
  EXPECT_EQ(versions.at("flashinfer-python"), "0.5.2");
  EXPECT_EQ(versions.at("nccl"), "2.27.3");
  EXPECT_FALSE(versions.count("requests"));  // not a package of interest
  std::system(("rm -rf " + root).c_str());
}

TEST(Caches, KeysTellWhichRanksAFileServes) {
  std::set<int> tp, ep;
  ranks_in_cache_key(
      "('trtllm::fused_moe::gemm1', 'MoERunner', (8, 64), (('tp_size', 4), ('tp_rank', 2), "
      "('ep_size', 2), ('ep_rank', 1)))",
      tp, ep);
  ranks_in_cache_key("op=x tp_rank=3", tp, ep);
  EXPECT_EQ(tp, (std::set<int>{2, 3}));
  EXPECT_EQ(ep, (std::set<int>{1}));
}

TEST(Caches, DirectoryFollowsVllmsVariables) {
  EXPECT_EQ(flashinfer_autotune_dir(
                {{"VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR", "/a"}, {"VLLM_CACHE_ROOT", "/b"}}),
            "/a");
  EXPECT_EQ(flashinfer_autotune_dir({{"VLLM_CACHE_ROOT", "/b"}, {"HOME", "/root"}}),
            "/b/flashinfer_autotune_cache");
  EXPECT_EQ(flashinfer_autotune_dir({{"HOME", "/root"}}),
            "/root/.cache/vllm/flashinfer_autotune_cache");
  EXPECT_EQ(flashinfer_autotune_dir({}), "");
}

TEST(Caches, FilesAreFingerprinted) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const auto root = testing::temp_path("cache");
  const std::string dir = "/home/u/.cache/vllm/flashinfer_autotune_cache";
  const std::string leaf = dir + "/0.5.3/sm90/1f2e";
  std::system(("mkdir -p " + root + leaf + " " + root + dir + "/broken").c_str());
  std::ofstream(root + leaf + "/autotune_configs.json")
      << R"json({"_metadata": {"gpu": "H100"}, "('op', 'MoERunner', (8, 64), (('tp_rank', 0),))": ["MoERunner", 3],
             "('op', 'MoERunner', (16, 64), (('tp_rank', 0),))": ["MoERunner", 1]})json";
  std::ofstream(root + dir + "/broken/autotune_configs.json") << "{ truncated";
  const auto files = flashinfer_autotune_files(root, dir);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, leaf + "/autotune_configs.json");
  EXPECT_EQ(files[0].entries, 2u);
  EXPECT_EQ(files[0].tp_ranks, std::set<int>{0});
  EXPECT_EQ(files[0].sha256.size(), 64u);
  EXPECT_NE(files[0].describe().find("2 entries, keys for tp_rank 0"), std::string::npos);
  EXPECT_EQ(files[1].error, "not JSON");
  EXPECT_TRUE(flashinfer_autotune_files(root, "/nowhere").empty());
  std::system(("rm -rf " + root).c_str());
}

TEST(Shm, UsageOfThisMachinesDevShmAndItsDescription) {
  const auto usage = shm_usage("");
  ASSERT_TRUE(usage);  // Debian mounts a tmpfs there
  EXPECT_GT(usage->size_bytes, 0u);
  EXPECT_LE(usage->used_bytes, usage->size_bytes);
  EXPECT_FALSE(shm_usage("/nonexistent-root"));
  const ShmUsage quarter{64u << 20, 16u << 20, 48u << 20};
  EXPECT_EQ(quarter.describe(), "64.0 MiB, 16.0 MiB used (25%), 48.0 MiB free");
}

}  // namespace
}  // namespace hangscope::facts
