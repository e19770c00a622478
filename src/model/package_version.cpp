#include "hangscope/model/package_version.h"

#include <cctype>
#include <limits>
#include <tuple>
#include <vector>

namespace hangscope::model {
namespace {

// Appends a decimal digit to n, saturating at 10^18 - 1: a version's numbers come from the
// target's files and may be any length (longer ones compare equal to each other).
void append_digit(long& n, char digit) {
  constexpr long kMax = 999'999'999'999'999'999;
  n = n > (kMax - 9) / 10 ? kMax : n * 10 + (digit - '0');
}

// 1.2.3rc1.dev4 → ({1,2,3}, stage, stage number, dev): final releases sort after pre-releases.
std::tuple<std::vector<long>, int, long, long> version_key(const std::string& v) {
  std::vector<long> release;
  std::size_t i = 0;
  while (i < v.size() && !std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
    long n = 0;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) append_digit(n, v[i++]);
    release.push_back(n);
    if (i < v.size() && v[i] == '.' && i + 1 < v.size() &&
        std::isdigit(static_cast<unsigned char>(v[i + 1]))) {
      ++i;
    } else {
      break;
    }
  }
  while (!release.empty() && release.back() == 0) release.pop_back();
  const std::string rest = v.substr(i);
  const auto number_after = [&](const std::string& tag) -> long {
    const auto at = rest.find(tag);
    if (at == std::string::npos) return -1;
    long n = 0;
    for (std::size_t j = at + tag.size();
         j < rest.size() && std::isdigit(static_cast<unsigned char>(rest[j])); ++j) {
      append_digit(n, rest[j]);
    }
    return n;
  };
  int stage = 3;  // final
  long stage_number = 0;
  for (const auto& [tag, s] :
       std::vector<std::pair<std::string, int>>{{"rc", 2}, {"b", 1}, {"a", 0}}) {
    if (const long n = number_after(tag); n >= 0 && rest.find(tag) < rest.find('+')) {
      stage = s;
      stage_number = n;
      break;
    }
  }
  const long dev = number_after(".dev");
  // A dev release sorts before everything else of the same release and stage.
  return {release, stage, stage_number, dev >= 0 ? dev : std::numeric_limits<long>::max()};
}

}  // namespace

std::string normalize_package_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == '_' || l == '.' || l == '-') {
      if (out.empty() || out.back() != '-') out += '-';
    } else {
      out += l;
    }
  }
  return out;
}

int compare_versions(const std::string& a, const std::string& b) {
  const auto ka = version_key(a), kb = version_key(b);
  return ka < kb ? -1 : (kb < ka ? 1 : 0);
}

}  // namespace hangscope::model
