// Rank sets written the way people read them: {0,1,2,3,5,7,8,9} → "0-3,5,7-9".
#pragma once

#include <set>
#include <string>
#include <vector>

namespace hangscope::analysis {

std::string compress_ranks(const std::set<int>& ranks);
std::string compress_ranks(const std::vector<int>& ranks);

}  // namespace hangscope::analysis
