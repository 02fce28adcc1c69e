#include "io/read_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/regular_file.hpp"

namespace moe::io {

AlignedRange align_range(uint64_t offset, uint64_t length, uint64_t alignment) {
    if (alignment <= 1) return AlignedRange{offset, length, 0};
    const uint64_t start = offset / alignment * alignment;
    const uint64_t end = round_up(offset + length, alignment);
    return AlignedRange{start, end - start, offset - start};
}

uint64_t aligned_length_bound(uint64_t length, uint64_t alignment) {
    if (alignment <= 1) return length;
    return round_up(length, alignment) + alignment;
}

ReadFile::ReadFile(const std::string &path, bool want_direct) : path_(path) {
    // A packed expert file or model shard: a named pipe is refused at once
    // rather than opened in blocking mode, which would wait for a writer.
    int err = 0;
    buffered_fd_ = open_regular_fd(path, err);
    if (buffered_fd_ < 0) {
        if (err != 0) fail_errno(err, "cannot open %s", path.c_str());
        fail(Status::io, "%s is not a regular file (a pipe, a device or a directory)", path.c_str());
    }
    struct stat st {};
    if (::fstat(buffered_fd_, &st) != 0) {
        const int err = errno;
        reset();
        fail_errno(err, "cannot stat %s", path.c_str());
    }
    size_ = static_cast<uint64_t>(st.st_size);
    if (!want_direct) return;
#ifdef O_DIRECT
    // O_NONBLOCK only for the open (the path may have been replaced by a pipe
    // since); asynchronous reads would honour it, so it is cleared again.
    direct_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT | O_NONBLOCK);
    if (direct_fd_ >= 0) {
        struct stat dst {};
        if (::fstat(direct_fd_, &dst) != 0 || !S_ISREG(dst.st_mode)) {
            ::close(direct_fd_);
            direct_fd_ = -1;
            errno = EINVAL;
        } else {
            ::fcntl(direct_fd_, F_SETFL, ::fcntl(direct_fd_, F_GETFL) & ~O_NONBLOCK);
        }
    }
    if (direct_fd_ < 0)
        direct_refused_ = format("%s: O_DIRECT refused (%s); using buffered reads", path.c_str(), std::strerror(errno));
#else
    direct_refused_ = "O_DIRECT is not available on this platform";
#endif
}

ReadFile::~ReadFile() { reset(); }

ReadFile::ReadFile(ReadFile &&o) noexcept
    : path_(std::move(o.path_)), size_(o.size_), direct_fd_(o.direct_fd_), buffered_fd_(o.buffered_fd_),
      direct_refused_(std::move(o.direct_refused_)) {
    o.direct_fd_ = o.buffered_fd_ = -1;
}

ReadFile &ReadFile::operator=(ReadFile &&o) noexcept {
    if (this != &o) {
        reset();
        path_ = std::move(o.path_);
        size_ = o.size_;
        direct_fd_ = o.direct_fd_;
        buffered_fd_ = o.buffered_fd_;
        direct_refused_ = std::move(o.direct_refused_);
        o.direct_fd_ = o.buffered_fd_ = -1;
    }
    return *this;
}

void ReadFile::reset() noexcept {
    if (direct_fd_ >= 0) ::close(direct_fd_);
    if (buffered_fd_ >= 0) ::close(buffered_fd_);
    direct_fd_ = buffered_fd_ = -1;
}

}  // namespace moe::io
