// moestream command-line tool: dispatches to the commands in commands.cpp.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "cli_util.hpp"
#include "commands.hpp"

namespace {

// To stdout when asked for (--help), as every command's usage; to stderr
// beside a usage error.
void print_usage(std::FILE *out) {
    std::fprintf(out, "usage: moestream <command> [options]\n\ncommands:\n");
    for (const cli::Command &c : cli::commands()) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
    std::fprintf(out, "\n'moestream <command> --help' describes a command's options.\n");
}

int dispatch(int argc, char **argv) {
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        print_usage(stdout);
        return 0;
    }
    if (!std::strcmp(argv[1], "--version")) argv[1] = const_cast<char *>("version");
    for (const cli::Command &c : cli::commands()) {
        if (std::strcmp(argv[1], c.name) == 0) return c.run(cli::Args(argv + 2, argv + argc));
    }
    std::fprintf(stderr, "moestream: unknown command '%s'\n", argv[1]);
    print_usage(stderr);
    return 2;
}

// A command that cannot allocate or meets another unexpected failure ends
// with a message and status 1, not std::terminate (and its outputs' temporary
// files are removed on the way out).
int run_guarded(int argc, char **argv) {
    try {
        return dispatch(argc, argv);
    } catch (const std::bad_alloc &) {
        std::fprintf(stderr, "moestream: out of memory\n");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "moestream: %s\n", e.what());
    }
    return 1;
}

// Output that never reached its destination (a full disk, a closed pipe) is a
// failure even when the command itself succeeded.
int check_stdout(int status) {
    const std::string why = cli::stdout_failure();
    if (why.empty()) return status;
    std::fprintf(stderr, "moestream: cannot write output: %s\n", why.c_str());
    return status ? status : 1;
}

}  // namespace

int main(int argc, char **argv) { return check_stdout(run_guarded(argc, argv)); }
