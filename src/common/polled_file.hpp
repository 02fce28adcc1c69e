// A small text file of the kernel's (/proc/meminfo, a cgroup's memory.stat)
// read again and again without allocating: the descriptor stays open and
// every read starts over at offset 0 into the caller's fixed buffer, line by
// line. Each read sees what opening the file afresh would show: a file that
// is missing is looked for again at the next read, and one that was removed
// since it was opened or fails to read is opened again by name.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/unique_fd.hpp"

namespace moe {

class PolledFile {
public:
    PolledFile() = default;
    explicit PolledFile(std::string path) : path_(std::move(path)) {}

    const std::string &path() const { return path_; }

    // Calls on_line(line) for each line of the file's current text (without
    // its '\n') until on_line returns false. A line longer than `scratch` is
    // skipped (the files read this way have short lines). False when the
    // file cannot be opened or read; lines passed before a failed read stand.
    template <typename OnLine>
    bool for_each_line(std::span<char> scratch, OnLine &&on_line);

private:
    // The descriptor of the file now at path_ (reopened when it was removed
    // since); false when there is none.
    bool open_current();
    // pread, retried when interrupted; on an error the descriptor is closed
    // so that the next read opens the file again. -1 on error.
    ssize_t read_at(char *into, size_t bytes, uint64_t offset);

    std::string path_;
    UniqueFd fd_;
};

template <typename OnLine>
bool PolledFile::for_each_line(std::span<char> scratch, OnLine &&on_line) {
    if (scratch.empty() || !open_current()) return false;
    size_t kept = 0;  // bytes of an unfinished line at the start of scratch
    bool skipping = false;  // inside a line longer than scratch
    uint64_t offset = 0;
    for (;;) {
        const ssize_t n = read_at(scratch.data() + kept, scratch.size() - kept, offset);
        if (n < 0) return false;
        offset += uint64_t(n);
        const std::string_view text(scratch.data(), kept + size_t(n));
        size_t at = 0;
        for (size_t eol; (eol = text.find('\n', at)) != std::string_view::npos; at = eol + 1) {
            if (std::exchange(skipping, false)) continue;
            if (!on_line(text.substr(at, eol - at))) return true;
        }
        if (n == 0) {  // end of file: a last line without '\n'
            if (at < text.size() && !skipping) on_line(text.substr(at));
            return true;
        }
        if (at == 0 && text.size() == scratch.size()) {  // no '\n' in a full buffer
            skipping = true;
            at = text.size();
        }
        kept = text.size() - at;
        std::memmove(scratch.data(), scratch.data() + at, kept);
    }
}

}  // namespace moe
