#include <cstdio>

#include "cli_util.hpp"
#include "commands.hpp"
#include "moestream.h"

namespace cli {

int cmd_version(const Args &args) {
    const char *usage = "usage: moestream version\nPrints the library version and the compute kernels in use.\n";
    if (!args.empty()) {
        if (args[0] != "--help" && args[0] != "-h")
            return usage_error("version", "unexpected argument '" + args[0] + "'");
        std::fputs(usage, stdout);
        return 0;
    }
    std::printf("moestream %s (header %s), kernels: %s\n", moestream_version_string(), MOESTREAM_VERSION_STRING,
                moestream_kernel_isa());
    return 0;
}

}  // namespace cli
