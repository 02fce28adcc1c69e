#include "commands.hpp"

namespace cli {

int cmd_version(const Args &args);

const std::vector<Command> &commands() {
    static const std::vector<Command> list = {
        {"version", "print the library version", cmd_version},
    };
    return list;
}

}  // namespace cli
