// Where tests find the source tree, build tree, Python and shared test data.
#pragma once
#include <string>

namespace moe::test {
std::string source_dir();
std::string binary_dir();
std::string python();          // Debian's python3 with numpy
std::string shared_dir();      // ../shared beside the source tree ("" if absent)
// A fresh empty directory under the build tree, unique per test.
std::string scratch_dir();
// Runs a shell command; returns its exit status (throws nothing).
int run(const std::string &command);
}  // namespace moe::test
