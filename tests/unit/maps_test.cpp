#include "hangscope/proc/maps.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace hangscope::proc {
namespace {

__attribute__((noinline)) int code_marker() {
  return 7;
}

TEST(Maps, ParsesFileAnonymousSpecialAndDeletedMappings) {
  const auto map = MemoryMap::parse(
      "55d0c0a00000-55d0c0a2e000 r--p 00000000 08:01 1311017 /usr/bin/python3.11\n"
      "55d0c0a2e000-55d0c0d05000 r-xp 0002e000 08:01 1311017 /usr/bin/python3.11\n"
      "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
      "7f1000000000-7f1000001000 r-xp 00001000 00:05 42 /tmp/lib with space.so (deleted)\n"
      "7ffc1c0f0000-7ffc1c111000 rw-p 00000000 00:00 0                          [stack]\n"
      "not a mapping line\n");
  ASSERT_EQ(map.mappings().size(), 5u);
  EXPECT_EQ(map.malformed_lines(), 1u);
  const auto* text = map.find(0x55d0c0a2e123);
  ASSERT_NE(text, nullptr);
  EXPECT_TRUE(text->executable);
  EXPECT_FALSE(text->writable);
  EXPECT_EQ(text->offset, 0x2e000u);
  EXPECT_EQ(text->inode, 1311017u);
  EXPECT_EQ(text->path, "/usr/bin/python3.11");
  EXPECT_TRUE(text->is_file());
  const auto* anon = map.find(0x7f0000000010);
  ASSERT_NE(anon, nullptr);
  EXPECT_EQ(anon->path, "");
  EXPECT_FALSE(anon->is_file());
  const auto* deleted = map.find(0x7f1000000000);
  ASSERT_NE(deleted, nullptr);
  EXPECT_TRUE(deleted->deleted);
  EXPECT_EQ(deleted->path, "/tmp/lib with space.so");
  EXPECT_EQ(map.find(0x7ffc1c110fff)->path, "[stack]");
  EXPECT_EQ(map.find(0x7ffc1c111000), nullptr);  // end is exclusive
  EXPECT_EQ(map.find(0x1000), nullptr);
}

TEST(Maps, RejectsMalformedLines) {
  EXPECT_FALSE(parse_maps_line(""));
  EXPECT_FALSE(parse_maps_line("zz-10 r-xp 0 00:00 0"));
  EXPECT_FALSE(parse_maps_line("20-10 r-xp 0 00:00 0"));  // end before start
  EXPECT_FALSE(parse_maps_line("10-20 r 0 00:00 0"));
}

TEST(Maps, ReadsOwnMapAndFindsOwnCode) {
  int error = 0;
  const auto map = read_memory_map(::getpid(), &error);
  ASSERT_TRUE(map) << error;
  const auto* here = map->find(reinterpret_cast<std::uint64_t>(&code_marker));
  ASSERT_NE(here, nullptr);
  EXPECT_TRUE(here->executable);
  int missing_error = 0;
  EXPECT_FALSE(read_memory_map(0x7ffffff0, &missing_error));
  EXPECT_EQ(missing_error, ENOENT);
}

// A child with a memfd mapped (a file no directory holds: " (deleted)"), an anonymous mapping
// named by prctl where the kernel has CONFIG_ANON_VMA_NAME, and the usual file, heap and stack
// mappings; it says so on `ready` and sleeps until killed.
pid_t start_mapped_child(int ready) {
  const pid_t child = ::fork();
  if (child == 0) {
    void* anon = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ::prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, anon, 8192, "hangscope test");
    const int memfd = ::memfd_create("hangscope memfd", 0);
    if (memfd >= 0 && ::ftruncate(memfd, 4096) == 0) {
      ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, memfd, 0);
    }
    const char byte = 1;
    [[maybe_unused]] const ssize_t written = ::write(ready, &byte, 1);
    for (;;) ::pause();
  }
  return child;
}

// Kills and reaps the child when the test ends, however it ends.
struct KilledAtEnd {
  pid_t pid;
  ~KilledAtEnd() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

bool same_lines(const MemoryMap& a, const MemoryMap& b) {
  return std::equal(a.mappings().begin(), a.mappings().end(), b.mappings().begin(),
                    b.mappings().end(), [](const Mapping& x, const Mapping& y) {
                      return x.start == y.start && x.end == y.end && x.path == y.path;
                    });
}

void expect_same_mapping(const Mapping& text, const Mapping& query) {
  EXPECT_EQ(text.start, query.start);
  EXPECT_EQ(text.end, query.end) << text.path;
  EXPECT_EQ(text.readable, query.readable) << text.path;
  EXPECT_EQ(text.writable, query.writable) << text.path;
  EXPECT_EQ(text.executable, query.executable) << text.path;
  EXPECT_EQ(text.offset, query.offset) << text.path;
  EXPECT_EQ(text.inode, query.inode) << text.path;
  EXPECT_EQ(text.device, query.device) << text.path;
  EXPECT_EQ(text.path, query.path);
  EXPECT_EQ(text.deleted, query.deleted) << text.path;
}

// PROCMAP_QUERY (Linux 6.11) and the text of maps describe the same mappings, field for field:
// names of files, deleted files, named anonymous memory, [heap] and [stack] included.
TEST(Maps, TheQueryAndTheTextAgree) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = start_mapped_child(ready[1]);
  const KilledAtEnd guard{child};
  ASSERT_GT(child, 0);
  char byte = 0;
  EXPECT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  // The text before and after the query, until they are the same (a sanitizer's runtime may
  // still map memory in the child).
  std::optional<MemoryMap> text, query;
  int error = 0, query_error = 0;
  for (int attempt = 0; attempt < 50; ++attempt) {
    text = read_memory_map(child, &error, MapsMethod::kText);
    query = read_memory_map(child, &query_error, MapsMethod::kQuery);
    const auto after = read_memory_map(child, &error, MapsMethod::kText);
    if (!text || !query || !after || same_lines(*text, *after)) break;
    ::usleep(10000);
  }
  ASSERT_TRUE(text) << error;
  if (!query && query_error == ENOTTY) GTEST_SKIP() << "this kernel has no PROCMAP_QUERY";
  ASSERT_TRUE(query) << query_error;
  std::vector<Mapping> listed;  // [vsyscall] is no VMA: the query never returns it
  for (const auto& m : text->mappings()) {
    if (m.path != "[vsyscall]") listed.push_back(m);
  }
  ASSERT_EQ(listed.size(), query->mappings().size());
  for (std::size_t i = 0; i < listed.size(); ++i) {
    expect_same_mapping(listed[i], query->mappings()[i]);
  }
  const auto named = [&](const std::string& path) {
    return std::count_if(query->mappings().begin(), query->mappings().end(),
                         [&](const Mapping& m) { return m.path == path; });
  };
  EXPECT_EQ(named("[stack]"), 1);  // ([heap] too, but not under a sanitizer's allocator)
  const auto memfd =
      std::find_if(query->mappings().begin(), query->mappings().end(),
                   [](const Mapping& m) { return m.path == "/memfd:hangscope memfd"; });
  ASSERT_NE(memfd, query->mappings().end());
  EXPECT_TRUE(memfd->deleted);
}

}  // namespace
}  // namespace hangscope::proc
