// Package names and versions as facts carry them: the normalized name and the PEP 440 order
// that rules compare versions by.
#pragma once

#include <string>

namespace hangscope::model {

// "Flashinfer_Python" → "flashinfer-python".
std::string normalize_package_name(const std::string& name);

// -1, 0, 1 like strcmp, for versions such as "0.26.1rc1.dev148+g1234" or "1.13.0a0+gitunknown":
// release numbers compare numerically; a pre-release (a, b, rc, dev) sorts before its release.
int compare_versions(const std::string& a, const std::string& b);

}  // namespace hangscope::model
