// moestream CLI commands. Each lives in its own cmd_<name>.cpp and uses only
// the public header. Every command returns a process exit code.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace cli {

using Args = std::vector<std::string>;  // arguments after the command name

struct Command {
    const char *name;
    const char *summary;
    int (*run)(const Args &args);
};

// The registry (commands.cpp) lists every command in help order.
const std::vector<Command> &commands();

}  // namespace cli
