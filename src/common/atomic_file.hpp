// A file written as a temporary beside its target and renamed over it by
// commit(), so the target only ever holds its previous contents or the whole
// new file. Every file the library publishes is written through it. Where the
// system allows (Linux, O_TMPFILE) the temporary has no name until commit(),
// so a process killed while writing (Ctrl-C) leaves no file behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"

namespace moe {

// The system calls AtomicFile makes, replaceable by tests to simulate a full
// disk or an I/O error part way. Each returns what the POSIX call returns and
// sets errno on failure.
struct FileOps {
    std::function<long(int fd, const void *buf, size_t n)> write;  // AtomicFile::write (write_at is not injectable)
    std::function<int(int fd)> fsync;  // the temporary file's, then the directory's
    std::function<int(const char *from, const char *to)> rename;
    std::function<int(const char *dir)> open_directory;  // read-only, for its fsync
    // An unnamed file in the directory, like openat(dir_fd, ".", O_TMPFILE);
    // -1 (or no function) where there is none: a named temporary is used.
    std::function<int(int dir_fd, unsigned mode)> open_unnamed;
    static const FileOps &posix();
};

// Where AtomicFile(target) writes: `file` is what its rename replaces (the
// target, or the file a symbolic link there leads to) and `directory` holds
// it: the temporary is created and the directory synced there. Writers that
// must not overlap lock `directory`, so the lock and the write name one
// directory. Throws moe::Error as AtomicFile's constructor does for a target
// it refuses.
struct WritePlace {
    std::string file;
    std::string directory;
};
WritePlace write_place(const std::string &target);

// Throws invalid_argument, naming `what` (e.g. "state file"), when `target`
// is one of `inputs` (the same device and inode: a symbolic or hard link to
// it too): AtomicFile renames over the target, which would replace that
// input (a model file) with what is written. A target that does not exist
// replaces nothing.
void refuse_to_replace(const std::string &target, const std::vector<std::string> &inputs, const char *what);

class AtomicFile {
public:
    // Opens the target's directory first, so that one that cannot be opened
    // (for the sync after the rename) fails before anything is written, then
    // creates the temporary in it, unique to this writer, with the mode
    // open(O_CREAT, mode) would give (the umask applies): an unnamed file,
    // linked as `.NAME.tmp.XXXXXX` only by commit() for its rename, or that
    // named file from the start where unnamed files are not supported. A target that is a
    // symbolic link is followed: the file it names is replaced and the link
    // stays a link. Throws moe::Error: invalid_argument for a path that names
    // no file or names something a rename cannot replace (a pipe, a device,
    // a directory, a link that leads nowhere), io naming the path and errno.
    explicit AtomicFile(std::string target, const FileOps &ops = FileOps::posix(), unsigned mode = 0666);
    ~AtomicFile();  // without commit(): closes and removes the temporary
    AtomicFile(const AtomicFile &) = delete;
    AtomicFile &operator=(const AtomicFile &) = delete;

    // The temporary's descriptor, for callers that write it themselves.
    int fd() const { return fd_.get(); }
    // Writes all `n` bytes at the file offset / at `offset`, resuming short writes.
    void write(const void *data, size_t n);
    void write_at(const void *data, size_t n, uint64_t offset);
    // Cuts the file to `size` bytes (bytes written past it are dropped).
    void truncate(uint64_t size);

    // fsync, link (an unnamed temporary), close, rename over the target, fsync of the directory. A failure
    // up to the rename throws and leaves the target as it was. After the
    // rename the new file is in place, so a directory that cannot be synced
    // (the rename may not survive a power loss) is no failure: it is described
    // in `*warning` when given ("" when none).
    void commit(std::string *warning = nullptr);

private:
    void link_unnamed();
    std::string target_;  // as given, for messages
    std::string dest_;    // what the rename replaces: target_ with symbolic links followed
    std::string temp_;    // the temporary's name (while unnamed_, the pattern it is linked by); "" once renamed
    std::string dir_;
    FileOps ops_;
    UniqueFd dir_fd_, fd_;
    bool unnamed_ = false;  // fd_ is an O_TMPFILE file not yet linked
};

}  // namespace moe
