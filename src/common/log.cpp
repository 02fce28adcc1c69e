#include "common/log.hpp"

#include <cstdarg>
#include <cstdio>

namespace moe {

void Log::write(int level, const char *fmt, ...) const noexcept {
    if (!enabled(level)) return;
    char buf[1024];  // fixed: logging must not allocate or fail
    va_list args;
    va_start(args, fmt);
    const int n = std::vsnprintf(buf, sizeof buf, fmt, args);
    va_end(args);
    if (n < 0) return;
    fn_(level, buf, user_);
}

}  // namespace moe
