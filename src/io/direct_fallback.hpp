// A ReadBackend decorator for filesystems that accept O_DIRECT at open() but
// refuse O_DIRECT reads with EINVAL. Each file registered through it is
// known by its O_DIRECT index and that index's buffered twin. A read through
// the O_DIRECT index that comes back -EINVAL is submitted again, unseen by
// the caller, through the twin (same offset, length, memory and tag), and
// from then on every read of that file goes straight to the twin.
//
// EINVAL through an O_DIRECT index is taken to mean the filesystem refuses
// O_DIRECT: callers keep those reads aligned (kDirectAlignment), so nothing
// else of theirs can cause it.
//
// For the caller a retried read is one read: one completion with its tag, in
// flight (in_flight()) until it lands, cancellable while the retry runs, and
// seen once by decorators above this one (ObservedBackend). Costs: a slot
// per read in flight, reserved up to the queue depth, so no call allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "io/forwarding_backend.hpp"
#include "io/read_file.hpp"

namespace moe::io {

class DirectFallbackBackend final : public ForwardingBackend {
public:
    explicit DirectFallbackBackend(std::unique_ptr<ReadBackend> inner);

    // Registers the file's descriptors and returns the index its reads use:
    // the O_DIRECT one, paired with the buffered one, when it has one; else
    // the buffered one.
    uint32_t add_read_file(const ReadFile &file);
    // Declares `buffered` the twin of `direct` (both already registered).
    void pair(uint32_t direct, uint32_t buffered);

    // Whether reads submitted with `file` go through O_DIRECT now: it has a
    // buffered twin and the filesystem has not refused a read of it.
    bool reads_direct(uint32_t file) const;
    // The buffered index behind `file` (`file` itself when it has no twin).
    uint32_t buffered_twin(uint32_t file) const;
    // Reads refused through an O_DIRECT index and read again buffered.
    uint64_t retried() const { return retried_; }

    void submit(const ReadRequest &request) override;
    void cancel(uint64_t tag) override;
    size_t reap(std::span<ReadCompletion> out, bool wait) override;

private:
    // A read in flight. The inner backend sees the slot's index as the tag,
    // so a completion finds its read without a search.
    struct Slot {
        ReadRequest request;      // as the caller submitted it
        bool used = false;
        bool direct = false;      // this attempt went through the O_DIRECT index
        bool cancelled = false;
    };
    struct Twin {
        uint32_t buffered = 0;
        bool paired = false;
        bool refused = false;     // an O_DIRECT read of the file came back EINVAL
    };
    const Twin *twin_of(uint32_t file) const { return file < twins_.size() && twins_[file].paired ? &twins_[file] : nullptr; }
    // Starts the slot's read again through the buffered twin; false when the
    // inner backend refused the submit (the EINVAL then goes to the caller).
    bool retry_buffered(uint32_t slot);

    std::vector<Slot> slots_;
    std::vector<uint32_t> free_slots_;
    std::vector<Twin> twins_;  // by file index
    uint64_t retried_ = 0;
};

}  // namespace moe::io
