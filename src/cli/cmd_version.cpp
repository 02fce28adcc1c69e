#include <cstdio>

#include "commands.hpp"
#include "moestream.h"

namespace cli {

int cmd_version(const Args &) {
    std::printf("moestream %s (header %s), kernels: %s\n", moestream_version_string(), MOESTREAM_VERSION_STRING,
                moestream_kernel_isa());
    return 0;
}

}  // namespace cli
