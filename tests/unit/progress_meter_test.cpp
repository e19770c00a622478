// The status line of long phases (ProgressMeter), on a fake clock and a fake terminal.
#include "hangscope/common/progress_meter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace hangscope {
namespace {

using namespace std::chrono_literals;

// A terminal (or a log) that keeps every write.
class FakeOutput : public StatusOutput {
 public:
  explicit FakeOutput(bool terminal, std::size_t columns = 0)
      : terminal_(terminal), columns_(columns) {}
  bool is_terminal() const override { return terminal_; }
  std::size_t columns() const override { return columns_; }
  void write(std::string_view bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    writes_.emplace_back(bytes);
  }
  std::vector<std::string> writes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return writes_;
  }
  std::string all() {
    std::string out;
    for (const auto& w : writes()) out += w;
    return out;
  }

 private:
  bool terminal_;
  std::size_t columns_;
  std::mutex mutex_;
  std::vector<std::string> writes_;
};

struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  ProgressMeter::Clock clock() {
    return [this] { return now; };
  }
};

TEST(ProgressMeterTest, NothingBeforeASecondThenTheLine) {
  FakeOutput out(true);
  FakeClock time;
  ProgressMeter meter(out, {}, time.clock());
  auto task = meter.start("reading", "big.json", 100'000'000, ProgressMeter::Unit::kBytes);
  time.now += 999ms;
  meter.tick();
  EXPECT_TRUE(out.writes().empty());
  task.set_done(45'000'000);
  time.now += 1ms;
  meter.tick();
  ASSERT_EQ(out.writes().size(), 1u);
  EXPECT_EQ(out.writes()[0], "\rhangscope: reading big.json: 45.0 MB of 100.0 MB (1 s)\x1b[K");
}

TEST(ProgressMeterTest, AShortPhaseWritesNothingAtAll) {
  FakeOutput out(true);
  FakeClock time;
  {
    ProgressMeter meter(out, {}, time.clock());
    for (int i = 0; i < 5; ++i) {
      auto task = meter.start("decoding", "a.json", 3);
      time.now += 500ms;
      task.set_done(2);
      meter.tick();
    }
  }
  EXPECT_TRUE(out.writes().empty());
}

TEST(ProgressMeterTest, RedrawnAtMostTenTimesASecond) {
  FakeOutput out(true);
  FakeClock time;
  ProgressMeter meter(out, {}, time.clock());
  auto task = meter.start("parsing", "big.json", 1000, ProgressMeter::Unit::kBytes);
  time.now += 1s;
  // Ticks and updates every 10 ms for 2 s: 200 chances, at most 21 draws (one per 100 ms).
  for (int i = 0; i < 200; ++i) {
    task.set_done(static_cast<std::uint64_t>(i));
    meter.tick();
    time.now += 10ms;
  }
  EXPECT_GE(out.writes().size(), 15u);
  EXPECT_LE(out.writes().size(), 21u);
}

TEST(ProgressMeterTest, ClearedWhenThePhaseEnds) {
  FakeOutput out(true);
  FakeClock time;
  ProgressMeter meter(out, {}, time.clock());
  auto task = meter.start("analysing", "", 0);
  time.now += 2s;
  meter.tick();
  ASSERT_EQ(out.writes().size(), 1u);
  task.end();
  ASSERT_EQ(out.writes().size(), 2u);
  EXPECT_EQ(out.writes()[1], "\r\x1b[K");
  meter.tick();  // nothing left: nothing more written
  EXPECT_EQ(out.writes().size(), 2u);
}

TEST(ProgressMeterTest, AMessageErasesTheLineFirst) {
  FakeOutput out(true);
  FakeClock time;
  ProgressMeter meter(out, {}, time.clock());
  auto task = meter.start("reading", "a.json");
  time.now += 2s;
  meter.tick();
  meter.print("hangscope: read 1 snapshot(s) from a.json\n");
  const auto writes = out.writes();
  ASSERT_EQ(writes.size(), 3u);
  EXPECT_EQ(writes[1], "\r\x1b[K");
  EXPECT_EQ(writes[2], "hangscope: read 1 snapshot(s) from a.json\n");
  time.now += 200ms;
  meter.tick();  // redrawn after the message
  EXPECT_EQ(out.writes().size(), 4u);
}

TEST(ProgressMeterTest, HostileNamesAreEscaped) {
  FakeOutput out(true);
  FakeClock time;
  ProgressMeter meter(out, {}, time.clock());
  // An escape sequence (clear the screen), a newline and bytes that are not UTF-8.
  auto task = meter.start("reading", std::string("evil\x1b[2J\n\xff\xfe.json"));
  time.now += 1s;
  meter.tick();
  const std::string line = out.all();
  EXPECT_NE(line.find("evil\\x1b[2J\\x0a\\xff\\xfe.json"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.find("\xff"), std::string::npos);
  // The only escape sequences are the meter's own: erase to the end of the line.
  EXPECT_EQ(line.find("\x1b[2J"), std::string::npos);
}

TEST(ProgressMeterTest, FitsTheTerminalWidth) {
  FakeOutput out(true, 40);
  FakeClock time;
  ProgressMeter meter(out, {}, time.clock());
  auto task = meter.start("reading", "a-very-long-snapshot-file-name-ünïcödé-模块.json");
  time.now += 1s;
  meter.tick();
  ASSERT_EQ(out.writes().size(), 1u);
  std::string text = out.writes()[0];
  text = text.substr(1, text.size() - 1 - 3);  // without \r and \x1b[K
  EXPECT_EQ(text, fit_columns(text, 39));
  std::size_t points = 0;
  for (char c : text) points += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  EXPECT_EQ(points, 39u);
  EXPECT_EQ(fit_columns("ab模块cd", 4), "ab模\xE2\x80\xA6");
}

TEST(ProgressMeterTest, ALogGetsOnePlainLinePerLongPhase) {
  FakeOutput out(false);
  FakeClock time;
  ProgressMeter meter(out, {}, time.clock());
  auto short_task = meter.start("decoding", "small.json");
  auto task = meter.start("reading", "big.json", 10, ProgressMeter::Unit::kItems);
  time.now += 500ms;
  short_task.end();
  for (int i = 0; i < 50; ++i) {
    task.stage("parsing", 10);
    task.set_done(static_cast<std::uint64_t>(i % 10));
    time.now += 100ms;
    meter.tick();
  }
  task.end();
  const auto writes = out.writes();
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0], "hangscope: parsing big.json (4 of 10)...\n");
  EXPECT_EQ(out.all().find('\r'), std::string::npos);
}

TEST(ProgressMeterTest, DisabledWritesNothing) {
  FakeOutput out(true);
  FakeClock time;
  ProgressMeter meter(out, {.delay = 1000ms, .redraw = 100ms, .enabled = false}, time.clock());
  auto task = meter.start("reading", "big.json");
  time.now += 5s;
  meter.tick();
  task.end();
  EXPECT_TRUE(out.writes().empty());
}

TEST(ProgressMeterTest, ParallelPhasesShareTheLine) {
  FakeOutput out(true);
  FakeClock time;
  ProgressMeter meter(out, {}, time.clock());
  auto a = meter.start("parsing", "a.json");
  auto b = meter.start("parsing", "b.json", 4);
  time.now += 1s;
  meter.tick();
  EXPECT_EQ(out.writes().at(0),
            "\rhangscope: parsing a.json (1 s) · parsing b.json: 0 of 4 (1 s)\x1b[K");
  a.end();  // b is still long: the line stays until the next draw
  EXPECT_EQ(out.writes().size(), 1u);
}

// The ticker's thread and the workers that update the phases (TSan runs this test).
TEST(ProgressMeterTest, TickerAndWorkersRaceFree) {
  FakeOutput out(true);
  ProgressMeter meter(out, {.delay = 0ms, .redraw = 1ms, .enabled = true});
  {
    ProgressTicker ticker(meter, 1ms);
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w) {
      workers.emplace_back([&meter] {
        for (int i = 0; i < 200; ++i) {
          auto task = meter.start("reading", "f.json", 100, ProgressMeter::Unit::kBytes);
          task.stage("parsing", 100);
          task.add_done(50);
          if (i % 50 == 0) meter.print("hangscope: note\n");
        }
      });
    }
    for (auto& w : workers) w.join();
  }
  EXPECT_FALSE(out.writes().empty());
}

}  // namespace
}  // namespace hangscope
