// Rank sets: as sorted, disjoint intervals (RankSet), and written the way people read them:
// {0,1,2,3,5,7,8,9} → "0-3,5,7-9".
#pragma once

#include <compare>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace hangscope::analysis {

// A set of ranks held as sorted, disjoint, non-adjacent intervals [first, last]. What a snapshot
// claims (a world of 2^31 - 1 ranks, a group of that size) is one interval, so every operation
// costs the number of intervals, never the number of ranks: the ranks present and the gaps
// between them.
class RankSet {
 public:
  struct Interval {
    int first = 0;
    int last = 0;  // inclusive
    auto operator<=>(const Interval&) const = default;
  };

  RankSet() = default;
  RankSet(std::initializer_list<int> ranks);
  explicit RankSet(const std::vector<int>& ranks);  // any order, duplicates allowed
  explicit RankSet(const std::set<int>& ranks);
  // [first, last]; empty when last < first.
  static RankSet range(int first, int last);

  void insert(int rank);
  void insert(int first, int last);
  void insert(const RankSet& other);  // union
  void erase(int rank);
  void erase(const RankSet& other);  // difference

  bool empty() const { return intervals_.empty(); }
  std::uint64_t size() const;  // the number of ranks (up to 2^32)
  bool contains(int rank) const;
  bool contains(const RankSet& other) const;  // every rank of `other` is in this set
  bool intersects(const RankSet& other) const;
  int front() const { return intervals_.front().first; }  // the smallest rank (not empty)
  const std::vector<Interval>& intervals() const { return intervals_; }

  // Every rank, in order: only for sets known to be small (the ranks of entries present), since
  // it costs the number of ranks.
  std::vector<int> list() const;
  // "0-3,5,7-9" (a run of two is written "7,8").
  std::string text() const;

  friend RankSet operator|(RankSet a, const RankSet& b) {
    a.insert(b);
    return a;
  }
  friend RankSet operator-(RankSet a, const RankSet& b) {
    a.erase(b);
    return a;
  }
  friend RankSet operator&(const RankSet& a, const RankSet& b);
  friend bool operator==(const RankSet&, const RankSet&) = default;
  friend auto operator<=>(const RankSet& a, const RankSet& b) {
    return a.intervals_ <=> b.intervals_;
  }
  // The same ranks in the same order as `ranks` (without expanding the set).
  friend bool operator==(const RankSet& a, const std::vector<int>& ranks);
  friend std::ostream& operator<<(std::ostream& out, const RankSet& set) {
    return out << "{" << set.text() << "}";
  }

 private:
  std::vector<Interval> intervals_;
};

std::string compress_ranks(const std::set<int>& ranks);
std::string compress_ranks(const std::vector<int>& ranks);
inline std::string compress_ranks(const RankSet& ranks) {
  return ranks.text();
}

// "rank 5", "ranks 0-3,5": the word agrees with the number of ranks.
std::string ranks_text(const RankSet& ranks);

}  // namespace hangscope::analysis
