// State save and load (docs/state-format.md).
#include "context_handle.hpp"
#include "firewall.hpp"

extern "C" {

MOESTREAM_API int moestream_state_save(moestream_context *ctx, const char *path) {
    return moe::capi::guarded("moestream_state_save", [&] {
        moe::capi::ContextUse use(ctx);
        moe::capi::require(path, "path");
        use->save_state(path);
    });
}

MOESTREAM_API int moestream_state_load(moestream_context *ctx, const char *path) {
    return moe::capi::guarded("moestream_state_load", [&] {
        moe::capi::ContextUse use(ctx);
        moe::capi::require(path, "path");
        use->load_state(path);
    });
}

}  // extern "C"
