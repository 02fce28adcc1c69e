// moestream command-line tool: dispatches to the commands in commands.cpp.
#include <cstdio>
#include <cstring>

#include "commands.hpp"

namespace {

void print_usage() {
    std::fprintf(stderr, "usage: moestream <command> [options]\n\ncommands:\n");
    for (const cli::Command &c : cli::commands()) std::fprintf(stderr, "  %-12s %s\n", c.name, c.summary);
    std::fprintf(stderr, "\n'moestream <command> --help' describes a command's options.\n");
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        print_usage();
        return argc < 2 ? 2 : 0;
    }
    if (!std::strcmp(argv[1], "--version")) argv[1] = const_cast<char *>("version");
    for (const cli::Command &c : cli::commands()) {
        if (std::strcmp(argv[1], c.name) == 0) return c.run(cli::Args(argv + 2, argv + argc));
    }
    std::fprintf(stderr, "moestream: unknown command '%s'\n", argv[1]);
    print_usage();
    return 2;
}
