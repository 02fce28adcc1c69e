// Version, status strings and the thread-local last-error message.
#include <string>

#include "firewall.hpp"
#include "kernels/kernels.hpp"

namespace moe::capi {
namespace {
thread_local std::string t_last_error;
}

void set_last_error(const std::string &message) {
    try {
        t_last_error = message;
    } catch (...) {
        t_last_error.clear();  // out of memory while reporting: keep an empty, valid message
    }
}

void clear_last_error() { t_last_error.clear(); }

const char *last_error_text() noexcept { return t_last_error.c_str(); }

void require_struct_size(size_t given, size_t current, std::initializer_list<size_t> earlier, const char *what) {
    if (given == current) return;
    for (size_t size : earlier)
        if (given == size) return;
    if (earlier.size() == 0)
        moe::fail(moe::Status::invalid_argument,
                  "%s.struct_size is %zu; expected %zu (initialise it with its _init function)", what, given, current);
    std::string sizes;
    for (size_t size : earlier) sizes += (sizes.empty() ? "" : ", ") + std::to_string(size);
    moe::fail(moe::Status::invalid_argument,
              "%s.struct_size is %zu; expected %zu, or an earlier version's size (%s) (initialise it with its _init "
              "function)",
              what, given, current, sizes.c_str());
}

}  // namespace moe::capi

extern "C" {

MOESTREAM_API int moestream_version_number(void) { return MOESTREAM_VERSION_NUMBER; }
MOESTREAM_API const char *moestream_version_string(void) { return MOESTREAM_VERSION_STRING; }
MOESTREAM_API const char *moestream_kernel_isa(void) { return moe::kernels::isa_name(moe::kernels::active_isa()); }

MOESTREAM_API const char *moestream_status_string(int status) {
    switch (status) {
    case MOESTREAM_OK: return "ok";
    case MOESTREAM_ERR_INVALID_ARGUMENT: return "invalid argument";
    case MOESTREAM_ERR_IO: return "I/O error";
    case MOESTREAM_ERR_BAD_FORMAT: return "bad format";
    case MOESTREAM_ERR_UNSUPPORTED: return "unsupported";
    case MOESTREAM_ERR_OUT_OF_MEMORY: return "out of memory";
    case MOESTREAM_ERR_STATE_MISMATCH: return "state mismatch";
    case MOESTREAM_ERR_CONTEXT_FULL: return "context full";
    case MOESTREAM_ERR_INTERNAL: return "internal error";
    case MOESTREAM_ERR_BUSY: return "context busy";
    default: return "unknown status";
    }
}

MOESTREAM_API const char *moestream_last_error(void) { return moe::capi::last_error_text(); }

}  // extern "C"
