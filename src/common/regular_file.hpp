// Opening a file the library only reads (a routing trace, a usage profile, a
// heat file, a state file, a packed expert file or model shard read through
// io::ReadFile) without waiting on what is not a file: open(2) of a named pipe
// for reading blocks until some process opens it for writing, which would
// hang a command (`moestream trace info FIFO`) before it could tell.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "common/unique_fd.hpp"

namespace moe {

struct FileCloser {
    void operator()(std::FILE *f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

// A read-only descriptor (blocking mode, close-on-exec) of `path` when it is a
// regular file; otherwise none, with `err` as below. `extra_flags` are added
// to the open's (O_DIRECT); `size`, when given, receives the file's size.
UniqueFd open_regular_fd(const std::string &path, int &err, int extra_flags = 0, uint64_t *size = nullptr);

// The same, throwing moe::Error as open_regular_file_or_fail does.
UniqueFd open_regular_fd_or_fail(const std::string &path, const char *what, uint64_t *size = nullptr);

// `path` opened for reading when it is a regular file. Otherwise null, with
// `err` the errno of the failed open, or 0 when the path names something
// else (a pipe, a device, a directory).
FilePtr open_regular_file(const std::string &path, int &err);

// The same, throwing moe::Error (io) that names `what` and the path.
FilePtr open_regular_file_or_fail(const std::string &path, const char *what);

}  // namespace moe
