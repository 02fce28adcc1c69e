#include "common/polled_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace moe {

bool PolledFile::open_current() {
    if (fd_) {
        // A file replaced or deleted since it was opened (st_nlink 0) still
        // reads its old text through the descriptor; the name is what counts.
        struct stat st;
        if (::fstat(fd_.get(), &st) == 0 && st.st_nlink > 0) return true;
        fd_.reset();
    }
    if (path_.empty()) return false;
    fd_.reset(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    return bool(fd_);
}

ssize_t PolledFile::read_at(char *into, size_t bytes, uint64_t offset) {
    for (;;) {
        const ssize_t n = ::pread(fd_.get(), into, bytes, off_t(offset));
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        fd_.reset();
        return -1;
    }
}

}  // namespace moe
