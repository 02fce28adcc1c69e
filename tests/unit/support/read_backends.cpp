#include "support/read_backends.hpp"

#include <fcntl.h>

#include <cerrno>

namespace moe::test {

void ScriptedBackend::submit(const io::ReadRequest &r) {
    submitted.push_back(r);
    ++in_flight_;
}

size_t ScriptedBackend::reap(std::span<io::ReadCompletion> out, bool) {
    size_t n = 0;
    while (n < out.size() && !ready_.empty()) {
        out[n++] = ready_.front();
        ready_.pop_front();
    }
    in_flight_ -= uint32_t(n);
    return n;
}

bool RefusingBackend::opened_direct(int fd) {
#ifdef O_DIRECT
    const int flags = ::fcntl(fd, F_GETFL);
    return flags >= 0 && (flags & O_DIRECT) != 0;
#else
    (void)fd;
    return false;
#endif
}

uint32_t RefusingBackend::add_file(int fd) {
    const uint32_t index = inner().add_file(fd);
    if (refused_files_.size() <= index) refused_files_.resize(size_t(index) + 1);
    refused_files_[index] = refuses_(fd);
    return index;
}

void RefusingBackend::submit(const io::ReadRequest &r) {
    submitted.push_back(r);
    const bool refuse = r.file < refused_files_.size() && refused_files_[r.file];
    io::ReadRequest sent = r;
    if (refuse) sent.length = 0;  // still a read the inner backend completes, in its turn, but of no bytes
    inner().submit(sent);
    refusing_[r.tag] = refuse;
}

size_t RefusingBackend::reap(std::span<io::ReadCompletion> out, bool wait) {
    const size_t n = inner().reap(out, wait);
    for (size_t i = 0; i < n; ++i) {
        auto it = refusing_.find(out[i].tag);
        if (it == refusing_.end()) continue;
        if (it->second && out[i].result >= 0) {
            out[i].result = -EINVAL;
            ++refused;
        }
        refusing_.erase(it);
    }
    return n;
}

}  // namespace moe::test
