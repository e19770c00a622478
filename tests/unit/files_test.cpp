// Files opened and written on behalf of input (issue 30, items 2, 5, 6 and 7): the one open
// helper against every kind of file it meets (regular, FIFO, character device, directory,
// symbolic link, another user's file), the replacing writer against a link at its path, and
// --force's removal of an earlier bundle by name only.
#include "hangscope/common/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "hangscope/common/error.h"
#include "hangscope/elf/mapped_file.h"
#include "hangscope/report/bundle_files.h"
#include "hangscope/snapshot/bundle_layout.h"
#include "target_process.h"

namespace hangscope {
namespace {

using Clock = std::chrono::steady_clock;

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_path("files");
    ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
  }
  std::string dir_;
};

TEST_F(Files, ARegularFileIsOpenedBlockingAndEverythingElseIsRefusedWithoutOpening) {
  write("log", "line\n");
  const auto file = open_regular_file(path("log"), "log");
  ASSERT_TRUE(file.ok()) << file.why();
  EXPECT_EQ(file.st.st_size, 5);
  EXPECT_EQ(::fcntl(file.fd.get(), F_GETFL) & O_NONBLOCK, 0);  // cleared once open
  EXPECT_EQ(*read_opened_file(file, 100).text, "line\n");

  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  ASSERT_EQ(::symlink(path("log").c_str(), path("link").c_str()), 0);
  const struct {
    std::string path;
    OpenRules rules;
    std::string reason;
  } refusals[] = {
      {path("fifo"), {}, "is a FIFO, not a regular file"},  // no writer: would block forever
      {"/dev/null", {}, "is a character device, not a regular file"},
      {"/dev/zero", {Links::kRefuse, std::nullopt}, "is a character device, not a regular file"},
      {dir_, {}, "is a directory"},
      {path("link"),
       {Links::kRefuse, std::nullopt},
       "is a symbolic link, which is not followed here"},
  };
  for (const auto& r : refusals) {
    const auto started = Clock::now();
    const auto opened = open_regular_file(r.path, "input", r.rules);
    EXPECT_LT(Clock::now() - started, std::chrono::seconds(2)) << r.path;
    EXPECT_FALSE(opened.ok()) << r.path;
    EXPECT_EQ(opened.error, EPERM) << r.path;
    EXPECT_EQ(opened.why(), "input " + r.path + ": " + r.reason) << r.path;
  }
  // The user's own path follows the link; an absent file is its errno.
  EXPECT_TRUE(open_regular_file(path("link"), "log").ok());
  const auto absent = open_regular_file(path("absent"), "core file");
  EXPECT_EQ(absent.error, ENOENT);
  EXPECT_EQ(absent.why(), "core file " + path("absent") + ": No such file or directory");
  // The readers built on it say the same.
  EXPECT_EQ(read_file(path("fifo")).error, EPERM);
  EXPECT_FALSE(read_file_tail(path("fifo"), "log", 100).text);
  EXPECT_EQ(*read_file_tail(path("log"), "log", 3).text, "ne\n");
  try {
    elf::MappedFile::open(path("fifo"), {}, "core file");
    ADD_FAILURE() << "a FIFO was mapped";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "core file " + path("fifo") + ": is a FIFO, not a regular file");
  }
}

TEST_F(Files, AnOwnerRuleTakesTheGivenUserOrRootOnly) {
  write("dump", "x");
  EXPECT_TRUE(open_regular_file(path("dump"), "dump", {Links::kRefuse, 4242}).ok());  // root's
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to uid 65534";
  ASSERT_EQ(::chown(path("dump").c_str(), 65534, 65534), 0);
  EXPECT_TRUE(open_regular_file(path("dump"), "dump", {Links::kRefuse, 65534}).ok());
  const auto other = open_regular_file(path("dump"), "dump", {Links::kRefuse, 4242});
  EXPECT_FALSE(other.ok());
  EXPECT_EQ(other.reason, "belongs to uid 65534, neither uid 4242 (the process's) nor root");
}

TEST_F(Files, AFifoForWritingMustBeAFifoWithAReader) {
  write("file", "keep");
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  const auto started = Clock::now();
  EXPECT_EQ(open_fifo_for_writing(path("fifo"), "fifo").error, ENXIO);  // nobody reads
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(2));
  EXPECT_EQ(open_fifo_for_writing(path("file"), "fifo").reason, "is a regular file, not a FIFO");
  const FileDescriptor reader(::open(path("fifo").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(reader);
  const auto writer = open_fifo_for_writing(path("fifo"), "fifo");
  ASSERT_TRUE(writer.ok()) << writer.why();
  EXPECT_NE(::fcntl(writer.fd.get(), F_GETFL) & O_NONBLOCK, 0);  // writes never block
}

// Issue 30 item 5: an output whose name is a link to a file elsewhere replaces the link; the
// file it pointed to keeps its bytes. No new file is left behind, written or not.
TEST_F(Files, AReplacingFileReplacesALinkAndNeverWritesThroughIt) {
  write("victim", "precious");
  ASSERT_EQ(::symlink(path("victim").c_str(), path("report.md").c_str()), 0);
  write_file_replacing(path("report.md"), "# report\n");
  EXPECT_EQ(*read_file(path("victim")).text, "precious");
  struct stat st {};
  ASSERT_EQ(::lstat(path("report.md").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(*read_file(path("report.md")).text, "# report\n");
  {
    ReplacingFile unfinished(path("report.json"), 0600);
    unfinished.stream() << "{";
  }  // never committed: removed
  EXPECT_EQ(list_directory(dir_), (std::vector<std::string>{"report.md", "victim"}));
  ReplacingFile json(path("report.json"), 0600);
  json.stream() << "{}";
  json.commit();
  ASSERT_EQ(::stat(path("report.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_THROW(write_file_replacing(path("absent/x"), "x"), Error);
  EXPECT_TRUE(is_replacement_of(".report.md.new-12-3", "report.md"));
  EXPECT_FALSE(is_replacement_of(".report.md.new-12-", "report.md"));
  EXPECT_FALSE(is_replacement_of("report.md.new-12-3", "report.md"));
}

// Issue 30 item 2: --force removes an earlier bundle's files by name and nothing else; a
// directory holding anything else loses nothing and the first foreign entry is named.
TEST_F(Files, AnEarlierBundleIsRemovedByNameAndAnythingElseStopsIt) {
  ASSERT_EQ(::mkdir(path("snapshots").c_str(), 0755), 0);
  for (const auto name : snapshot::kBundleFiles) write(std::string(name), "x");
  write("snapshots/node0.json", "{}");
  write("snapshots/node-1.pb", "");
  write(".report.md.new-77-0", "half");  // an interrupted write
  EXPECT_EQ(report::remove_earlier_bundle(dir_), "");
  EXPECT_EQ(list_directory(dir_), std::vector<std::string>{});

  // An empty snapshots/ beside the user's files (issue 30's home directory): refused.
  ASSERT_EQ(::mkdir(path("snapshots").c_str(), 0755), 0);
  write("thesis.tex", "years of work");
  EXPECT_EQ(report::remove_earlier_bundle(dir_), "thesis.tex");
  EXPECT_EQ(list_directory(dir_), (std::vector<std::string>{"snapshots", "thesis.tex"}));
  ASSERT_EQ(::unlink(path("thesis.tex").c_str()), 0);
  // Foreign entries inside snapshots/, and a bundle name that is no regular file.
  write("snapshots/notes.txt", "mine");
  EXPECT_EQ(report::remove_earlier_bundle(dir_), "snapshots/notes.txt");
  ASSERT_EQ(::unlink(path("snapshots/notes.txt").c_str()), 0);
  write("elsewhere", "mine");
  ASSERT_EQ(::symlink(path("elsewhere").c_str(), path("report.md").c_str()), 0);
  EXPECT_EQ(report::remove_earlier_bundle(dir_), "elsewhere");  // sorted: named first
  ASSERT_EQ(::unlink(path("elsewhere").c_str()), 0);
  EXPECT_EQ(report::remove_earlier_bundle(dir_), "report.md");  // a dangling link
  EXPECT_EQ(list_directory(dir_), (std::vector<std::string>{"report.md", "snapshots"}));
}

TEST(BundleNames, SnapshotFilesAreNodeNamesWithTheirExtension) {
  EXPECT_TRUE(snapshot::is_snapshot_file_name("node0.json"));
  EXPECT_TRUE(snapshot::is_snapshot_file_name("10.0.0.1_7447.pb"));
  EXPECT_FALSE(snapshot::is_snapshot_file_name(".json"));
  EXPECT_FALSE(snapshot::is_snapshot_file_name("node0.txt"));
  EXPECT_FALSE(snapshot::is_snapshot_file_name("a b.json"));
}

}  // namespace
}  // namespace hangscope
