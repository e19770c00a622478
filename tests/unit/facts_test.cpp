// Package versions from a process's own files: name normalization, version order, and
// metadata found beside the code (dist-info with METADATA, egg-info dirs and files, libnccl).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "hangscope/facts/versions.h"
#include "target_process.h"

namespace hangscope::facts {
namespace {

TEST(Versions, NamesAreNormalized) {
  EXPECT_EQ(normalize_package_name("Flashinfer_Python"), "flashinfer-python");
  EXPECT_EQ(normalize_package_name("nvidia.nccl__cu12"), "nvidia-nccl-cu12");
}

TEST(Versions, OrderFollowsReleasesThenPreReleases) {
  EXPECT_LT(compare_versions("0.26.1rc1.dev148+g1234", "0.26.1"), 0);
  EXPECT_LT(compare_versions("0.26.1rc1.dev148", "0.26.1rc1.dev149"), 0);
  EXPECT_LT(compare_versions("0.26.1rc1.dev148", "0.26.1rc1"), 0);
  EXPECT_GT(compare_versions("0.27.1", "0.26.1rc1.dev148"), 0);
  EXPECT_LT(compare_versions("0.27.1", "0.27.2"), 0);
  EXPECT_EQ(compare_versions("1.13.0", "1.13"), 0);
  EXPECT_LT(compare_versions("1.13.0a0+gitunknown", "1.13.0"), 0);
  EXPECT_GT(compare_versions("0.10.0", "0.9.5"), 0);
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

}  // namespace
}  // namespace hangscope::facts
