// Runs a fuzz target's entry point over files, without libFuzzer: every
// argument is a file or a directory whose regular files are replayed (missing
// directories are skipped, so an empty regressions/ folder is fine).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

// Hidden files and notes (README*) in corpus folders are not inputs.
bool skipped(const std::filesystem::path &p) {
    const std::string name = p.filename().string();
    return name.empty() || name[0] == '.' || name.rfind("README", 0) == 0;
}

int replay(const std::filesystem::path &file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "cannot read %s\n", file.c_str());
        return 1;
    }
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A private heap copy so out-of-bounds reads are caught by sanitizers.
    std::vector<uint8_t> copy(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(copy.data(), copy.size());
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    size_t count = 0;
    int failures = 0;
    for (int i = 1; i < argc; ++i) {
        const std::filesystem::path p(argv[i]);
        std::error_code ec;
        if (std::filesystem::is_regular_file(p, ec)) {
            failures += replay(p);
            ++count;
            continue;
        }
        if (!std::filesystem::is_directory(p, ec)) continue;
        std::vector<std::filesystem::path> files;
        for (const auto &e : std::filesystem::recursive_directory_iterator(p))
            if (e.is_regular_file() && !skipped(e.path())) files.push_back(e.path());
        std::sort(files.begin(), files.end());
        for (const auto &f : files) {
            failures += replay(f);
            ++count;
        }
    }
    std::printf("replayed %zu inputs\n", count);
    return failures ? 1 : 0;
}
