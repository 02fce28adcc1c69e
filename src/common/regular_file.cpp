#include "common/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.hpp"

namespace moe {

UniqueFd open_regular_fd(const std::string &path, int &err, int extra_flags, uint64_t *size) {
    // O_NONBLOCK: a pipe opens at once, and fstat tells it is none.
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | extra_flags));
    if (!fd) {
        err = errno;
        return fd;
    }
    struct stat st {};
    const bool stated = ::fstat(fd.get(), &st) == 0;
    if (!stated || !S_ISREG(st.st_mode)) {
        err = stated ? 0 : errno;
        return UniqueFd();
    }
    if (size) *size = static_cast<uint64_t>(st.st_size);
    // Reads of a regular file never wait anyway; blocking mode keeps the
    // descriptor's (and stdio's and asynchronous reads') view of it the
    // ordinary one.
    ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
    return fd;
}

namespace {

[[noreturn]] void fail_not_regular(const std::string &path, int err, const char *what) {
    if (err != 0) fail_errno(err, "%s: cannot open %s", path.c_str(), what);
    fail(Status::io, "%s: cannot read it as a %s: it is not a regular file (a pipe, a device or a directory)",
         path.c_str(), what);
}

}  // namespace

UniqueFd open_regular_fd_or_fail(const std::string &path, const char *what, uint64_t *size) {
    int err = 0;
    UniqueFd fd = open_regular_fd(path, err, 0, size);
    if (!fd) fail_not_regular(path, err, what);
    return fd;
}

FilePtr open_regular_file(const std::string &path, int &err) {
    UniqueFd fd = open_regular_fd(path, err);
    if (!fd) return nullptr;
    FilePtr file(::fdopen(fd.get(), "rb"));
    if (!file) {
        err = errno;
        return nullptr;
    }
    fd.release();  // the stream closes it
    return file;
}

FilePtr open_regular_file_or_fail(const std::string &path, const char *what) {
    int err = 0;
    FilePtr file = open_regular_file(path, err);
    if (!file) fail_not_regular(path, err, what);
    return file;
}

}  // namespace moe
