#include <cstdio>
#include <string>

#include "cli_util.hpp"
#include "commands.hpp"
#include "moestream.h"

namespace cli {

int cmd_version(const Args &args) {
    ParsedArgs a;
    std::string error;
    if (!parse_args(args, {}, {"--help"}, a, error, {{"-h", "--help"}})) return usage_error("version", error);
    if (a.flags.count("--help")) {
        std::fputs("usage: moestream version\nPrints the library version and the compute kernels in use.\n", stdout);
        return 0;
    }
    if (const std::string extra = unexpected_argument(a); !extra.empty()) return usage_error("version", extra);
    std::printf("moestream %s (header %s), kernels: %s\n", moestream_version_string(), MOESTREAM_VERSION_STRING,
                moestream_kernel_isa());
    return 0;
}

}  // namespace cli
