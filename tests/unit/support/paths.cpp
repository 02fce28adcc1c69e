#include "support/paths.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

namespace moe::test {

std::string source_dir() { return MOESTREAM_SOURCE_DIR; }
std::string binary_dir() { return MOESTREAM_BINARY_DIR; }
std::string python() { return MOESTREAM_PYTHON; }

std::string shared_dir() {
    std::filesystem::path p = std::filesystem::path(source_dir()).parent_path() / "shared";
    return std::filesystem::is_directory(p) ? p.string() : std::string();
}

std::string scratch_dir() {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "global";
    for (char &c : name)
        if (c == '/') c = '_';
    std::filesystem::path p = std::filesystem::path(binary_dir()) / "test-scratch" / name;
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p.string();
}

int run(const std::string &command) {
    int rc = std::system(command.c_str());
    if (rc == -1) return -1;
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

}  // namespace moe::test
