// The project's own shared state under concurrent use (run under ThreadSanitizer by
// tools/run-tests.sh): one symbol table searched by many capture workers while its index is
// built, one module cache filled by parallel process captures, frame lists shared across threads.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "hangscope/elf/elf_file.h"
#include "hangscope/elf/mapped_file.h"
#include "hangscope/elf/module_cache.h"
#include "hangscope/elf/symbol_table.h"
#include "hangscope/model/process_dump.h"

namespace hangscope {
namespace {

constexpr int kThreads = 4;

TEST(Concurrency, OneSymbolTableSearchedByManyThreadsWhileItsIndexIsBuilt) {
  const auto file = elf::MappedFile::open("/lib/x86_64-linux-gnu/libc.so.6");
  const auto elf = elf::ElfFile::parse(file->bytes());
  std::vector<std::uint64_t> addresses;
  for (const auto& sym : elf.symbols(elf::SymbolTable::main_table_of(elf))) {
    if (sym.type == 2 /* STT_FUNC */ && sym.value != 0 && sym.size > 1) {
      addresses.push_back(sym.value + 1);
    }
    if (addresses.size() == 200) break;
  }
  ASSERT_EQ(addresses.size(), 200u);
  const elf::SymbolTable reference(elf);
  const auto expected = reference.lookup_many(addresses);
  const elf::SymbolTable shared(elf);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&] {
      for (int round = 0; round < elf::SymbolTable::kScansBeforeIndex; ++round) {
        const auto got = shared.lookup_many(addresses);
        for (std::size_t i = 0; i < got.size(); ++i) {
          if (got[i].has_value() != expected[i].has_value() ||
              (got[i] && got[i]->name != expected[i]->name)) {
            ++mismatches;
          }
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_TRUE(shared.indexed());  // 4 x 8 searches crossed the threshold
}

TEST(Concurrency, ParallelCapturesOpeningOneModuleShareTheFirstStored) {
  elf::ModuleCache cache;
  const elf::ModuleCache::Key key{"8:1", 42, "/lib/x86_64-linux-gnu/libc.so.6"};
  std::atomic<int> opened{0};
  std::vector<std::shared_ptr<const elf::Module>> got(kThreads);
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      got[t] = cache.get(key, [&] {
        ++opened;
        return std::shared_ptr<const elf::Module>(
            elf::Module::open(std::get<2>(key), std::get<2>(key), {}));
      });
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_GE(opened.load(), 1);
  EXPECT_EQ(cache.size(), 1u);
  for (const auto& module : got) {
    ASSERT_NE(module, nullptr);
    EXPECT_EQ(module.get(), got[0].get());
  }
}

TEST(Concurrency, FrameListsSharedAcrossThreadsAreCopiedBeforeAChange) {
  model::Frame frame;
  frame.function = "barrier";
  const model::FrameList original(std::vector<model::Frame>(64, frame));
  std::vector<std::thread> workers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        model::FrameList mine = original;  // shares
        mine.edit([&](auto& frames) { frames[0].function = "worker " + std::to_string(t); });
        if (original[0].function != "barrier" || mine[0].function == "barrier") ++wrong;
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace hangscope
