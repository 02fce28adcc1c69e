#include "io/read_file.hpp"

#include <fcntl.h>

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
    buffered_fd_ = open_regular_fd(path, err, 0, &size_);
    if (!buffered_fd_) {
        if (err != 0) fail_errno(err, "cannot open %s", path.c_str());
        fail(Status::io, "%s is not a regular file (a pipe, a device or a directory)", path.c_str());
    }
    if (!want_direct) return;
#ifdef O_DIRECT
    // Opened again: the path may have been replaced by a pipe since.
    direct_fd_ = open_regular_fd(path, err, O_DIRECT);
    if (!direct_fd_)
        direct_refused_ = format("%s: O_DIRECT refused (%s); using buffered reads", path.c_str(),
                                 std::strerror(err != 0 ? err : EINVAL));
#else
    direct_refused_ = "O_DIRECT is not available on this platform";
#endif
}

}  // namespace moe::io
