#include "common/error.hpp"

#include <cstdio>
#include <cstring>
#include <vector>

namespace moe {

std::string vformat(const char *fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    const int n = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    if (n <= 0) return std::string();
    std::string out(static_cast<size_t>(n), '\0');
    std::vsnprintf(out.data(), out.size() + 1, fmt, args);
    return out;
}

std::string format(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string s = vformat(fmt, args);
    va_end(args);
    return s;
}

void fail(Status status, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string s = vformat(fmt, args);
    va_end(args);
    throw Error(status, std::move(s));
}

void fail_errno(int err, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string s = vformat(fmt, args);
    va_end(args);
    char buf[128];
    const char *text = strerror_r(err, buf, sizeof buf);
    s += format(": %s (errno %d)", text, err);
    throw Error(Status::io, std::move(s));
}

}  // namespace moe
