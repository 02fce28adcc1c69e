// The readers of routing traces, usage profiles and packed expert files take
// a path: a fuzz target hands them its input as an anonymous in-memory file
// (memfd), named through /proc/self/fd, rewritten for every input.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace moe::fuzz {

class InputFile {
public:
    InputFile() : fd_(memfd_create("fuzz-input", 0)) {
        if (fd_ < 0) std::abort();
        path_ = "/proc/self/fd/" + std::to_string(fd_);
    }
    ~InputFile() { ::close(fd_); }
    InputFile(const InputFile &) = delete;
    InputFile &operator=(const InputFile &) = delete;

    // Replaces the contents with exactly these bytes.
    const std::string &holding(const uint8_t *data, size_t size) {
        if (::ftruncate(fd_, 0) != 0) std::abort();
        for (size_t done = 0; done < size;) {
            const ssize_t n = ::pwrite(fd_, data + done, size - done, off_t(done));
            if (n <= 0) std::abort();
            done += size_t(n);
        }
        return path_;
    }

private:
    int fd_;
    std::string path_;
};

}  // namespace moe::fuzz
