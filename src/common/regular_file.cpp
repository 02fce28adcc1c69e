#include "common/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.hpp"

namespace moe {

int open_regular_fd(const std::string &path, int &err) {
    // O_NONBLOCK: a pipe opens at once, and fstat tells it is none.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        err = errno;
        return -1;
    }
    struct stat st {};
    const bool stated = ::fstat(fd, &st) == 0;
    if (!stated || !S_ISREG(st.st_mode)) {
        err = stated ? 0 : errno;
        ::close(fd);
        return -1;
    }
    // Reads of a regular file never wait anyway; blocking mode keeps the
    // descriptor's (and stdio's) view of it the ordinary one.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

namespace {

[[noreturn]] void fail_not_regular(const std::string &path, int err, const char *what) {
    if (err != 0) fail_errno(err, "%s: cannot open %s", path.c_str(), what);
    fail(Status::io, "%s: cannot read it as a %s: it is not a regular file (a pipe, a device or a directory)",
         path.c_str(), what);
}

}  // namespace

int open_regular_fd_or_fail(const std::string &path, const char *what) {
    int err = 0;
    const int fd = open_regular_fd(path, err);
    if (fd < 0) fail_not_regular(path, err, what);
    return fd;
}

FilePtr open_regular_file(const std::string &path, int &err) {
    const int fd = open_regular_fd(path, err);
    if (fd < 0) return nullptr;
    FilePtr file(::fdopen(fd, "rb"));
    if (!file) {
        err = errno;
        ::close(fd);
    }
    return file;
}

FilePtr open_regular_file_or_fail(const std::string &path, const char *what) {
    int err = 0;
    FilePtr file = open_regular_file(path, err);
    if (!file) fail_not_regular(path, err, what);
    return file;
}

}  // namespace moe
