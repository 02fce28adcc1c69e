// Internal error type. Library code throws moe::Error; the C API firewall
// (capi/) turns it into a moestream_status plus the thread's last-error text.
#pragma once

#include <cstdarg>
#include <stdexcept>
#include <string>

#include "moestream.h"

namespace moe {

enum class Status : int {
    ok = MOESTREAM_OK,
    invalid_argument = MOESTREAM_ERR_INVALID_ARGUMENT,
    io = MOESTREAM_ERR_IO,
    bad_format = MOESTREAM_ERR_BAD_FORMAT,
    unsupported = MOESTREAM_ERR_UNSUPPORTED,
    out_of_memory = MOESTREAM_ERR_OUT_OF_MEMORY,
    state_mismatch = MOESTREAM_ERR_STATE_MISMATCH,
    context_full = MOESTREAM_ERR_CONTEXT_FULL,
    internal = MOESTREAM_ERR_INTERNAL,
    busy = MOESTREAM_ERR_BUSY,
};

class Error : public std::runtime_error {
public:
    Error(Status status, std::string message)
        : std::runtime_error(std::move(message)), status_(status) {}
    Status status() const noexcept { return status_; }

private:
    Status status_;
};

// printf-style throw helpers; the format is checked by the compiler.
[[noreturn]] void fail(Status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Like fail(Status::io, ...) but appends ": <strerror(err)> (errno N)".
[[noreturn]] void fail_errno(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vformat(const char *fmt, va_list args);

}  // namespace moe
