#include "hangscope/analysis/rank_set.h"

#include <algorithm>

namespace hangscope::analysis {
namespace {

// Interval arithmetic in 64 bits: ranks reach INT_MIN and INT_MAX.
std::int64_t wide(int rank) {
  return static_cast<std::int64_t>(rank);
}

// Appends [first, last] to sorted intervals that end before `first`, merging when it touches
// the last one.
void append(std::vector<RankSet::Interval>& out, int first, int last) {
  if (!out.empty() && wide(out.back().last) + 1 >= wide(first)) {
    out.back().last = std::max(out.back().last, last);
    return;
  }
  out.push_back({first, last});
}

}  // namespace

RankSet::RankSet(std::initializer_list<int> ranks) : RankSet(std::vector<int>(ranks)) {}

RankSet::RankSet(const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (int r : sorted) append(intervals_, r, r);
}

RankSet::RankSet(const std::set<int>& ranks) {
  for (int r : ranks) append(intervals_, r, r);
}

RankSet RankSet::range(int first, int last) {
  RankSet out;
  if (first <= last) out.intervals_.push_back({first, last});
  return out;
}

void RankSet::insert(int rank) {
  insert(rank, rank);
}

void RankSet::insert(int first, int last) {
  if (last < first) return;
  // Appending in order (the common case) is constant time.
  if (intervals_.empty() || wide(intervals_.back().last) + 1 <= wide(first)) {
    append(intervals_, first, last);
    return;
  }
  insert(range(first, last));
}

void RankSet::insert(const RankSet& other) {
  if (other.empty()) return;
  if (empty()) {
    intervals_ = other.intervals_;
    return;
  }
  // Sets added in rank order (the roots of a verdict, one by one) only append.
  if (intervals_.back().last < other.intervals_.front().first) {
    for (const auto& i : other.intervals_) append(intervals_, i.first, i.last);
    return;
  }
  std::vector<Interval> out;
  out.reserve(intervals_.size() + other.intervals_.size());
  auto a = intervals_.cbegin();
  auto b = other.intervals_.cbegin();
  while (a != intervals_.cend() || b != other.intervals_.cend()) {
    const bool take_a =
        b == other.intervals_.cend() || (a != intervals_.cend() && a->first <= b->first);
    const Interval& next = take_a ? *a++ : *b++;
    append(out, next.first, next.last);
  }
  intervals_ = std::move(out);
}

void RankSet::erase(int rank) {
  erase(range(rank, rank));
}

void RankSet::erase(const RankSet& other) {
  if (empty() || other.empty()) return;
  std::vector<Interval> out;
  out.reserve(intervals_.size() + other.intervals_.size());
  auto b = other.intervals_.begin();
  for (const auto& a : intervals_) {
    std::int64_t from = a.first;  // the part of `a` not yet decided
    while (b != other.intervals_.end() && b->last < a.first) ++b;
    for (auto c = b; c != other.intervals_.end() && c->first <= a.last; ++c) {
      if (wide(c->first) > from) out.push_back({static_cast<int>(from), c->first - 1});
      from = std::max(from, wide(c->last) + 1);
    }
    if (from <= a.last) out.push_back({static_cast<int>(from), a.last});
  }
  intervals_ = std::move(out);
}

RankSet operator&(const RankSet& a, const RankSet& b) {
  RankSet out;
  auto x = a.intervals_.begin(), y = b.intervals_.begin();
  while (x != a.intervals_.end() && y != b.intervals_.end()) {
    const int first = std::max(x->first, y->first);
    const int last = std::min(x->last, y->last);
    if (first <= last) out.intervals_.push_back({first, last});
    (x->last < y->last ? x : y)++;
  }
  return out;
}

std::uint64_t RankSet::size() const {
  std::uint64_t n = 0;
  for (const auto& i : intervals_)
    n += static_cast<std::uint64_t>(wide(i.last) - wide(i.first) + 1);
  return n;
}

bool RankSet::contains(int rank) const {
  // The first interval that ends at or after `rank`.
  const auto it = std::lower_bound(intervals_.begin(), intervals_.end(), rank,
                                   [](const Interval& i, int r) { return i.last < r; });
  return it != intervals_.end() && it->first <= rank;
}

bool RankSet::contains(const RankSet& other) const {
  return (other - *this).empty();
}

bool RankSet::intersects(const RankSet& other) const {
  auto x = intervals_.begin(), y = other.intervals_.begin();
  while (x != intervals_.end() && y != other.intervals_.end()) {
    if (std::max(x->first, y->first) <= std::min(x->last, y->last)) return true;
    (x->last < y->last ? x : y)++;
  }
  return false;
}

std::vector<int> RankSet::list() const {
  std::vector<int> out;
  for (const auto& i : intervals_) {
    for (std::int64_t r = i.first; r <= i.last; ++r) out.push_back(static_cast<int>(r));
  }
  return out;
}

std::string RankSet::text() const {
  std::string out;
  for (const auto& i : intervals_) {
    if (!out.empty()) out += ",";
    out += std::to_string(i.first);
    if (i.last > i.first) {
      out += (wide(i.last) == wide(i.first) + 1 ? "," : "-") + std::to_string(i.last);
    }
  }
  return out;
}

bool operator==(const RankSet& a, const std::vector<int>& ranks) {
  auto r = ranks.begin();
  for (const auto& i : a.intervals_) {
    for (std::int64_t expected = i.first; expected <= i.last; ++expected, ++r) {
      if (r == ranks.end() || *r != expected) return false;
    }
  }
  return r == ranks.end();
}

std::string compress_ranks(const std::set<int>& ranks) {
  return RankSet(ranks).text();
}

std::string compress_ranks(const std::vector<int>& ranks) {
  return RankSet(ranks).text();
}

std::string ranks_text(const RankSet& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + ranks.text();
}

}  // namespace hangscope::analysis
