// moestream trace record: runs a model and writes the routing of every token.
#include <cstdio>

#include "cli_util.hpp"
#include "commands.hpp"
#include "moestream.h"

namespace cli {

int trace_record(const Args &) {
    std::fprintf(stderr, "moestream trace record: this build cannot run models yet\n");
    return 1;
}

}  // namespace cli
