// The exception firewall every extern "C" body runs inside: no C++ exception,
// and no unwinding of any kind, crosses into C or Python.
#pragma once

#include <initializer_list>
#include <new>
#include <string>

#include "common/error.hpp"
#include "moestream.h"

namespace moe::capi {

// Records the calling thread's last error message.
void set_last_error(const std::string &message);
void clear_last_error();
const char *last_error_text() noexcept;

// Runs body() (which returns void) and maps whatever it throws to a status.
template <typename Body>
int guarded(const char *function, Body &&body) noexcept {
    try {
        body();
        return MOESTREAM_OK;
    } catch (const moe::Error &e) {
        set_last_error(std::string(function) + ": " + e.what());
        return static_cast<int>(e.status());
    } catch (const std::bad_alloc &) {
        set_last_error(std::string(function) + ": out of memory");
        return MOESTREAM_ERR_OUT_OF_MEMORY;
    } catch (const std::exception &e) {
        set_last_error(std::string(function) + ": internal error: " + e.what());
        return MOESTREAM_ERR_INTERNAL;
    } catch (...) {
        set_last_error(std::string(function) + ": internal error: unknown exception");
        return MOESTREAM_ERR_INTERNAL;
    }
}

// Throws invalid_argument naming the parameter when p is NULL.
template <typename T>
T *require(T *p, const char *what) {
    if (!p) moe::fail(moe::Status::invalid_argument, "%s is NULL", what);
    return p;
}

// Checks a caller-provided struct_size: exactly `current` (the size this
// header declares) or exactly one of `earlier`, the sizes of the struct's
// earlier released layouts. A size in between would have the library read or
// write part of a field.
void require_struct_size(size_t given, size_t current, std::initializer_list<size_t> earlier, const char *what);
inline void require_struct_size(size_t given, size_t current, const char *what) {
    require_struct_size(given, current, {}, what);
}

}  // namespace moe::capi
