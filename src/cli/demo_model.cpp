#include "demo_model.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "cli_util.hpp"
#include "moestream.h"
#include "os_handles.hpp"

namespace cli {
namespace {

// The name changes whenever the generator draws different weights, so a
// model written by an older version is not reused.
constexpr const char *kModelName = "demo-qwen3moe-q4_k_m-g2.gguf";

struct GenProgress {
    int last = -1;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

void on_progress(uint64_t done, uint64_t total, void *user) {
    auto *p = static_cast<GenProgress *>(user);
    const int pct = total ? int(done * 100 / total) : 100;
    if (pct == p->last) return;
    p->last = pct;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p->start).count();
    const bool tty = ::isatty(2);
    if (!tty && pct % 25 != 0) return;
    std::fprintf(stderr, "%s  generating: %3d%%  %s  %.1f s%s", tty ? "\r" : "", pct, format_bytes(done).c_str(), s,
                 tty && pct < 100 ? "" : "\n");
}

// Why the file at `path` cannot be streamed ("" when it can).
std::string unusable(const std::string &path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
    moestream_model_info info;
    moestream_model_info_init(&info);
    const int status = moestream_inspect(path.c_str(), 0, &info);
    return status == MOESTREAM_OK ? "" : library_error("moestream_inspect", status);
}

// Removes every file of `dir`: what a generation killed before it finished
// (Ctrl-C, a full disk, an out-of-memory kill) left behind, several GiB that
// nothing else would ever delete.
void empty_directory(const std::string &dir) {
    const std::unique_ptr<DIR, int (*)(DIR *)> d(::opendir(dir.c_str()), ::closedir);
    if (!d) return;
    while (const dirent *e = ::readdir(d.get()))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
            ::unlink((dir + "/" + e->d_name).c_str());
}

// Writes the model into `scratch` (a directory only the demo writes, held
// locked) and moves it to `path` once complete.
bool generate(const std::string &scratch, const std::string &path, std::string &error) {
    moestream_generate_params g;
    moestream_generate_params_init(&g);
    g.preset = "demo";
    g.quant = "q4_k_m";
    uint64_t size = 0;
    moestream_generate_model_size(&g, &size);
    std::printf("writing a random-weight qwen3moe model (%s, Q4_K_M) to %s\n", format_bytes(size).c_str(), path.c_str());
    flush_stdout();
    GenProgress progress;
    g.progress = on_progress;
    g.progress_user_data = &progress;
    const std::string partial = scratch + "/" + kModelName;
    if (const int st = moestream_generate_model(&g, partial.c_str()); st != MOESTREAM_OK) {
        error = library_error("moestream_generate_model", st);
        return false;
    }
    if (::rename(partial.c_str(), path.c_str()) != 0) {
        error = "cannot move " + partial + " to " + path + ": " + std::strerror(errno);
        ::unlink(partial.c_str());
        return false;
    }
    return true;
}

}  // namespace

std::string ensure_demo_model(std::string &error) {
    const std::string dir = user_cache_dir(error);
    if (dir.empty()) return "";
    const std::string path = dir + "/" + kModelName;
    // Generations go to a directory of their own, locked while in use: two
    // demos started together write the model once (the second waits, then
    // finds it), and whatever the directory holds when the lock is taken is
    // left over from a run that was killed.
    const std::string scratch = dir + "/partial";
    if (::mkdir(scratch.c_str(), 0755) != 0 && errno != EEXIST) {
        error = "cannot create " + scratch + ": " + std::strerror(errno);
        return "";
    }
    const UniqueFd lock(::open(scratch.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!lock || ::flock(lock.get(), LOCK_EX) != 0) {
        error = "cannot lock " + scratch + ": " + std::strerror(errno);
        return "";
    }
    const std::string why = unusable(path);
    if (why.empty()) return path;
    empty_directory(scratch);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        // Removed first: it is of no use, and its space may be what the new one needs.
        std::printf("The cached demo model cannot be used (%s): ", why.c_str());
        ::unlink(path.c_str());
    } else {
        std::printf("First run: ");
    }
    return generate(scratch, path, error) ? path : "";
}

}  // namespace cli
