// The caller's log callback (moestream_params.log_fn). The library never
// prints on its own; it formats a message only when the callback wants the level.
#pragma once

#include "moestream.h"

namespace moe {

class Log {
public:
    Log() = default;
    Log(moestream_log_fn fn, void *user_data, int max_level) : fn_(fn), user_(user_data), max_level_(max_level) {}

    bool enabled(int level) const { return fn_ && level <= max_level_; }
    // printf-style; never throws (a message that cannot be formatted is dropped).
    void write(int level, const char *fmt, ...) const noexcept __attribute__((format(printf, 3, 4)));

private:
    moestream_log_fn fn_ = nullptr;
    void *user_ = nullptr;
    int max_level_ = MOESTREAM_LOG_WARN;
};

}  // namespace moe
