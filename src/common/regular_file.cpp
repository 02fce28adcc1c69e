#include "common/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.hpp"

namespace moe {

FilePtr open_regular_file(const std::string &path, int &err) {
    // O_NONBLOCK: a pipe opens at once, and fstat tells it is none.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        err = errno;
        return nullptr;
    }
    struct stat st {};
    const bool stated = ::fstat(fd, &st) == 0;
    if (!stated || !S_ISREG(st.st_mode)) {
        err = stated ? 0 : errno;
        ::close(fd);
        return nullptr;
    }
    // Reads of a regular file never wait anyway; blocking mode keeps stdio's
    // view of the descriptor the ordinary one.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
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
    if (file) return file;
    if (err != 0) fail_errno(err, "%s: cannot open %s", path.c_str(), what);
    fail(Status::io, "%s: cannot read it as a %s: it is not a regular file (a pipe, a device or a directory)",
         path.c_str(), what);
}

}  // namespace moe
