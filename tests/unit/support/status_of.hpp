// The moe::Status a call ends with: ok, or the status of the moe::Error it
// throws (its message copied to *message).
#pragma once

#include <functional>
#include <string>

#include "common/error.hpp"

namespace moe::test {

Status status_of(const std::function<void()> &fn, std::string *message = nullptr);

}  // namespace moe::test
