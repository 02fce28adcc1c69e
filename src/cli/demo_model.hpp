// The model 'moestream demo' streams when none is given: generated once into
// the user's cache directory and reused while it stays usable.
#pragma once

#include <string>

namespace cli {

// The path of the cached demo model, written first when it is missing or
// cannot be used (a truncated or damaged file is replaced, not reported on
// every run). "" with `error` set when there is no cache directory or the
// model cannot be written.
std::string ensure_demo_model(std::string &error);

}  // namespace cli
