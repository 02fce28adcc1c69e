#include "common/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"

namespace moe {

void refuse_to_replace(const std::string &target, const std::vector<std::string> &inputs, const char *what) {
    struct stat out {};
    if (target.empty() || ::stat(target.c_str(), &out) != 0) return;
    for (const std::string &input : inputs)
        if (struct stat in {}; ::stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
            fail(Status::invalid_argument, "refusing to write the %s to %s: it is the model file %s", what,
                 target.c_str(), input.c_str());
}

namespace {

// Replaces the last six characters of `path` with fresh ones until
// `make(path)` does not fail with EEXIST; returns what it returned last.
template <typename Make>
int with_unique_name(std::string &path, Make &&make) {
    static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (int attempt = 0; attempt < 1000; ++attempt) {
        // A taken name costs one more attempt (O_EXCL, linkat), so the clock
        // will do where the kernel has no randomness yet.
        uint64_t r;
        if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r)
            r = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) + uint64_t(attempt);
        for (size_t i = path.size() - 6; i < path.size(); ++i, r /= 62) path[i] = kChars[r % 62];
        const int result = make(path);
        if (result >= 0 || errno != EEXIST) return result;
    }
    errno = EEXIST;
    return -1;
}

// `.NAME.tmp.XXXXXX` in `dir`, NAME cut so the temporary's name stays within
// a directory entry's limit: a target whose own name is near that limit is
// written all the same.
std::string temporary_beside(const std::string &dir, const std::string &name) {
    constexpr size_t kNameMax = 255, kAdded = sizeof(".") - 1 + sizeof(".tmp.XXXXXX") - 1;
    return dir + "/." + name.substr(0, kNameMax - kAdded) + ".tmp.XXXXXX";
}

// Creates `path` under a fresh name. This is mkostemp but with the caller's
// mode: the kernel then applies the umask (and a default ACL) as for any new
// file, which a chmod after mkostemp could only imitate by reading the umask,
// and umask(2) can only be read by changing it under the process's other threads.
int create_unique(std::string &path, unsigned mode) {
    return with_unique_name(path, [mode](const std::string &p) {
        return ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(mode));
    });
}

// An unnamed file in the directory (O_TMPFILE): a process that ends before
// commit(), by a signal or a crash, leaves nothing behind. Linking it needs
// /proc/self/fd (linkat's AT_EMPTY_PATH needs a capability); without it, or
// where the kernel or file system has no O_TMPFILE, -1 and the caller names
// its temporary instead.
int open_unnamed_posix(int dir_fd, unsigned mode) {
#ifdef O_TMPFILE
    if (::access("/proc/self/fd", X_OK) != 0) return -1;
    return ::openat(dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode_t(mode));
#else
    (void)dir_fd;
    (void)mode;
    errno = EOPNOTSUPP;
    return -1;
#endif
}

// Calls `step(bytes, count, done)` until all `n` bytes are written.
template <typename Step>
void write_fully(const void *data, size_t n, const std::string &target, Step &&step) {
    const auto *p = static_cast<const uint8_t *>(data);
    for (size_t done = 0; done < n;) {
        const long w = step(p + done, n - done, done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) fail_errno(w < 0 ? errno : ENOSPC, "cannot write %s", target.c_str());
        done += static_cast<size_t>(w);
    }
}

// The file a rename over `target` should replace. A symbolic link is followed
// (a rename would replace the link itself, and /dev/stdout is one), so the
// link keeps pointing at the new file. Whatever else is not a plain file
// cannot be replaced by a rename without destroying it.
std::string file_to_replace(const std::string &target) {
    struct stat st {};
    if (::lstat(target.c_str(), &st) != 0) return target;  // a new file; a missing directory fails later
    if (S_ISREG(st.st_mode)) return target;
    // stat() follows links the kernel resolves itself (/proc/self/fd/N);
    // canonical() names the file only when the link leads to a path.
    std::error_code ec;
    std::string path;
    if (S_ISLNK(st.st_mode)) {
        if (::stat(target.c_str(), &st) != 0)
            fail(Status::invalid_argument, "cannot write %s: it is a symbolic link to nothing", target.c_str());
        if (S_ISREG(st.st_mode)) path = std::filesystem::canonical(target, ec).string();
    }
    if (path.empty() || ec)
        fail(Status::invalid_argument,
             "cannot write %s: it is not a plain file (files are written beside their target and renamed over it)",
             target.c_str());
    return path;
}

}  // namespace

WritePlace write_place(const std::string &target) {
    const std::string name = std::filesystem::path(target).filename().string();
    if (name.empty() || name == "." || name == "..")
        fail(Status::invalid_argument, "'%s' does not name a file to write", target.c_str());
    WritePlace place;
    place.file = file_to_replace(target);
    const std::filesystem::path path(place.file);
    place.directory = path.has_parent_path() ? path.parent_path().string() : std::string(".");
    return place;
}

const FileOps &FileOps::posix() {
    static const FileOps ops{
        [](int fd, const void *buf, size_t n) -> long { return ::write(fd, buf, n); },
        [](int fd) { return ::fsync(fd); },
        [](const char *from, const char *to) { return std::rename(from, to); },
        [](const char *dir) { return ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); },
        open_unnamed_posix,
    };
    return ops;
}

AtomicFile::AtomicFile(std::string target, const FileOps &ops, unsigned mode) : target_(std::move(target)), ops_(ops) {
    WritePlace place = write_place(target_);
    dest_ = std::move(place.file);
    dir_ = std::move(place.directory);
    // The temporary's name, for a named one now or an unnamed one at commit();
    // before any descriptor: may throw.
    temp_ = temporary_beside(dir_, std::filesystem::path(dest_).filename().string());
    dir_fd_.reset(ops_.open_directory(dir_.c_str()));
    if (!dir_fd_) fail_errno(errno, "cannot open directory %s to write %s", dir_.c_str(), target_.c_str());
    fd_.reset(ops_.open_unnamed ? ops_.open_unnamed(dir_fd_.get(), mode) : -1);
    if (fd_)
        unnamed_ = true;  // named only at commit(), for the rename
    else
        fd_.reset(create_unique(temp_, mode));
    if (!fd_) fail_errno(errno, "cannot create a temporary file beside %s", target_.c_str());
}

// Gives the unnamed file a temporary name beside the target, for the rename:
// linkat cannot replace an existing file, and a rename needs a name.
void AtomicFile::link_unnamed() {
    const std::string fd_path = "/proc/self/fd/" + std::to_string(fd_.get());
    const int linked = with_unique_name(temp_, [&](const std::string &n) {
        return ::linkat(AT_FDCWD, fd_path.c_str(), AT_FDCWD, n.c_str(), AT_SYMLINK_FOLLOW);
    });
    if (linked != 0) fail_errno(errno, "cannot link the temporary file of %s into %s", target_.c_str(), dir_.c_str());
    unnamed_ = false;
}

AtomicFile::~AtomicFile() {
    if (!unnamed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void *data, size_t n) {
    write_fully(data, n, target_, [&](const uint8_t *p, size_t len, size_t) { return ops_.write(fd_.get(), p, len); });
}

void AtomicFile::write_at(const void *data, size_t n, uint64_t offset) {
    write_fully(data, n, target_, [&](const uint8_t *p, size_t len, size_t done) {
        return long(::pwrite(fd_.get(), p, len, off_t(offset + done)));
    });
}

void AtomicFile::truncate(uint64_t size) {
    int rc;
    do rc = ::ftruncate(fd_.get(), off_t(size));
    while (rc != 0 && errno == EINTR);
    if (rc != 0) fail_errno(errno, "cannot write %s", target_.c_str());
}

void AtomicFile::commit(std::string *warning) {
    if (!fd_) fail(Status::internal, "%s: committed twice", target_.c_str());
    if (ops_.fsync(fd_.get()) != 0) fail_errno(errno, "cannot sync %s", target_.c_str());
    if (unnamed_) link_unnamed();
    const int closed = ::close(fd_.release());  // may report a deferred write error
    if (closed != 0) fail_errno(errno, "cannot close %s", target_.c_str());
    if (ops_.rename(temp_.c_str(), dest_.c_str()) != 0)
        fail_errno(errno, "cannot rename %s to %s", temp_.c_str(), dest_.c_str());
    temp_.clear();
    std::string note;
    if (ops_.fsync(dir_fd_.get()) != 0 && errno != EINVAL && errno != ENOTSUP) {
        const int err = errno;
        note = format("%s written, but directory %s could not be synced (%s, errno %d): it may not survive a "
                      "power loss",
                      target_.c_str(), dir_.c_str(), std::strerror(err), err);
    }
    if (warning) *warning = std::move(note);
}

}  // namespace moe
