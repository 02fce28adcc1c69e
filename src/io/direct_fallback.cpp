#include "io/direct_fallback.hpp"

#include <cerrno>

#include "common/error.hpp"

namespace moe::io {

DirectFallbackBackend::DirectFallbackBackend(std::unique_ptr<ReadBackend> inner) : ForwardingBackend(std::move(inner)) {
    const uint32_t depth = ForwardingBackend::queue_depth();
    slots_.resize(depth);
    free_slots_.reserve(depth);
    for (uint32_t i = depth; i > 0; --i) free_slots_.push_back(i - 1);
}

uint32_t DirectFallbackBackend::add_read_file(const ReadFile &file) {
    const uint32_t buffered = add_file(file.buffered_fd());
    if (!file.direct()) return buffered;
    const uint32_t direct = add_file(file.direct_fd());
    pair(direct, buffered);
    return direct;
}

void DirectFallbackBackend::pair(uint32_t direct, uint32_t buffered) {
    if (twins_.size() <= direct) twins_.resize(size_t(direct) + 1);
    twins_[direct] = Twin{buffered, true, false};
}

bool DirectFallbackBackend::reads_direct(uint32_t file) const {
    const Twin *twin = twin_of(file);
    return twin && !twin->refused;
}

uint32_t DirectFallbackBackend::buffered_twin(uint32_t file) const {
    const Twin *twin = twin_of(file);
    return twin ? twin->buffered : file;
}

void DirectFallbackBackend::submit(const ReadRequest &request) {
    if (free_slots_.empty())
        fail(Status::internal, "direct fallback: submit with a full queue (%zu)", slots_.size());
    const uint32_t slot = free_slots_.back();
    const Twin *twin = twin_of(request.file);
    const bool direct = twin && !twin->refused;
    ReadRequest sent = request;
    sent.file = twin && !direct ? twin->buffered : request.file;
    sent.tag = slot;
    inner().submit(sent);  // may throw: take the slot only once the read is queued
    free_slots_.pop_back();
    slots_[slot] = Slot{request, true, direct, false};
}

void DirectFallbackBackend::cancel(uint64_t tag) {
    for (uint32_t slot = 0; slot < slots_.size(); ++slot) {
        Slot &s = slots_[slot];
        if (!s.used || s.request.tag != tag) continue;
        s.cancelled = true;  // a refused attempt then completes as cancelled, not retried
        inner().cancel(slot);
    }
}

bool DirectFallbackBackend::retry_buffered(uint32_t slot) {
    Slot &s = slots_[slot];
    ReadRequest again = s.request;
    again.file = twins_[s.request.file].buffered;
    again.tag = slot;
    try {
        // There is room: the refused attempt has just left the inner queue.
        inner().submit(again);
    } catch (...) {
        // Throwing here would lose the completions reaped with this one.
        return false;
    }
    s.direct = false;
    ++retried_;
    return true;
}

size_t DirectFallbackBackend::reap(std::span<ReadCompletion> out, bool wait) {
    for (;;) {
        const size_t got = inner().reap(out, wait);
        size_t n = 0;
        for (size_t i = 0; i < got; ++i) {
            const uint64_t slot = out[i].tag;
            // A completion for no read of ours would free a slot twice and
            // hand the next read's completion to another caller.
            if (slot >= slots_.size() || !slots_[slot].used)
                fail(Status::internal, "direct fallback: completion for slot %llu, which has no read in flight",
                     static_cast<unsigned long long>(slot));
            Slot &s = slots_[slot];
            int64_t result = out[i].result;
            if (result == -EINVAL && s.direct) {
                twins_[s.request.file].refused = true;  // later reads go buffered without a failed attempt
                if (s.cancelled)
                    result = -ECANCELED;  // given up by the caller: not read, and no error of the file's
                else if (retry_buffered(uint32_t(slot)))
                    continue;
            }
            out[n++] = ReadCompletion{s.request.tag, result};
            s.used = false;
            free_slots_.push_back(uint32_t(slot));
        }
        // Every completion reaped may have been a refused attempt whose retry
        // has only just started: a waiting caller waits for it.
        if (n > 0 || got == 0 || !wait) return n;
    }
}

}  // namespace moe::io
