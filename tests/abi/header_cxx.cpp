// The public header from C++ (-pedantic -Werror): extern "C" linkage, no
// name clashes, and the runtime version agreeing with the header's.
#include <moestream.h>

#include <cstdio>
#include <cstring>
#include <type_traits>

static_assert(std::is_standard_layout_v<moestream_params>);
static_assert(std::is_trivially_copyable_v<moestream_stats>);
static_assert(sizeof(moestream_status) == sizeof(int));

int main() {
    int failures = 0;
    auto check = [&](bool ok, const char *what) {
        if (!ok) {
            std::fprintf(stderr, "check failed: %s\n", what);
            ++failures;
        }
    };
    check(moestream_version_number() == MOESTREAM_VERSION_NUMBER, "version number");
    check(std::strcmp(moestream_version_string(), MOESTREAM_VERSION_STRING) == 0, "version string");
    check(std::strcmp(MOESTREAM_VERSION_STRING, MOESTREAM_PROJECT_VERSION) == 0, "header = project version");
    check(MOESTREAM_VERSION_MAJOR == MOESTREAM_EXPECTED_ABI_MAJOR, "major = SOVERSION");
    check(std::strcmp(moestream_status_string(MOESTREAM_ERR_BUSY), "context busy") == 0, "status string");

    moestream_sampler_params sp;
    moestream_sampler_params_init(&sp);
    sp.top_k = -3;
    moestream_sampler *sampler = nullptr;
    check(moestream_sampler_new(&sp, &sampler) == MOESTREAM_ERR_INVALID_ARGUMENT, "top_k < 0 rejected");
    check(sampler == nullptr, "no handle on failure");
    check(std::strstr(moestream_last_error(), "top_k") != nullptr, "message names the field");
    moestream_sampler_free(sampler);

    if (failures) return 1;
    std::printf("moestream %s: C++ header and runtime agree\n", moestream_version_string());
    return 0;
}
