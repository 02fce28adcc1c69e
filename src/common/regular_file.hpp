// Opening a file the library only reads (a routing trace, a usage profile, a
// heat file, a state file, a packed expert file or model shard read through
// io::ReadFile) without waiting on what is not a file: open(2) of a named pipe
// for reading blocks until some process opens it for writing, which would
// hang a command (`moestream trace info FIFO`) before it could tell.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

namespace moe {

struct FileCloser {
    void operator()(std::FILE *f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

// A read-only descriptor (blocking mode, close-on-exec) of `path` when it is a
// regular file; otherwise -1, with `err` as below. The caller closes it.
int open_regular_fd(const std::string &path, int &err);

// The same, throwing moe::Error as open_regular_file_or_fail does.
int open_regular_fd_or_fail(const std::string &path, const char *what);

// `path` opened for reading when it is a regular file. Otherwise null, with
// `err` the errno of the failed open, or 0 when the path names something
// else (a pipe, a device, a directory).
FilePtr open_regular_file(const std::string &path, int &err);

// The same, throwing moe::Error (io) that names `what` and the path.
FilePtr open_regular_file_or_fail(const std::string &path, const char *what);

}  // namespace moe
