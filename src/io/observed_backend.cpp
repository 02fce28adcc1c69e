#include "io/observed_backend.hpp"

#include "common/monotonic_clock.hpp"

namespace moe::io {

uint64_t ObservedBackend::steady_now_ns() { return monotonic_ns(); }

ObservedBackend::ObservedBackend(std::unique_ptr<ReadBackend> inner, Clock clock)
    : ForwardingBackend(std::move(inner)), clock_(clock ? clock : &steady_now_ns) {}

uint32_t ObservedBackend::add_file(int fd) {
    const uint32_t index = inner().add_file(fd);
    if (paths_.size() <= index) paths_.resize(size_t(index) + 1);
    return index;
}

void ObservedBackend::name_file(uint32_t file, std::string path) {
    if (paths_.size() <= file) paths_.resize(size_t(file) + 1);
    paths_[file] = std::move(path);
}

const std::string &ObservedBackend::file_path(uint32_t file) const {
    static const std::string none;
    return file < paths_.size() ? paths_[file] : none;
}

void ObservedBackend::submit(const ReadRequest &request) {
    inner().submit(request);  // may throw: count the read only once it is queued
    const uint64_t now = clock_();
    advance(now);
    if (pending_++ == 0) busy_since_ = now;
    if (log_capacity_ > 0) {
        if (log_.size() < log_capacity_)
            log_.push_back(LoggedRead{request.offset, request.length, request.file});
        else
            ++dropped_;
    }
}

size_t ObservedBackend::reap(std::span<ReadCompletion> out, bool wait) {
    const size_t n = inner().reap(out, wait);
    if (n == 0) return 0;
    const uint64_t now = clock_();
    advance(now);
    for (size_t i = 0; i < n; ++i) {
        ++done_.reads;
        if (out[i].result > 0) done_.bytes += uint64_t(out[i].result);
    }
    pending_ = n >= pending_ ? 0 : pending_ - uint32_t(n);
    if (pending_ == 0) done_.busy_ns += now - busy_since_;
    return n;
}

IoActivity ObservedBackend::activity() const {
    IoActivity a = done_;
    if (pending_ > 0) {
        const uint64_t now = clock_();
        a.busy_ns += now - busy_since_;
        a.read_ns += uint64_t(pending_) * (now - last_event_);
    }
    return a;
}

void ObservedBackend::reset_activity() {
    done_ = IoActivity{};
    const uint64_t now = clock_();
    last_event_ = now;
    if (pending_ > 0) busy_since_ = now;
}

void ObservedBackend::start_log(size_t capacity) {
    std::vector<LoggedRead> fresh;
    fresh.reserve(capacity);  // throws bad_alloc before anything changes
    log_.swap(fresh);
    log_capacity_ = capacity;
    dropped_ = 0;
}

}  // namespace moe::io
