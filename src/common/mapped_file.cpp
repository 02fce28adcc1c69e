#include "common/mapped_file.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/error.hpp"
#include "common/huge_pages.hpp"
#include "common/regular_file.hpp"

namespace moe {

MappedFile::MappedFile(const std::string &path) {
    // A named pipe is refused without waiting for a writer.
    int err = 0;
    uint64_t size = 0;
    fd_ = open_regular_fd(path, err, 0, &size);
    if (!fd_) {
        if (err != 0) fail_errno(err, "cannot open %s", path.c_str());
        fail(Status::io, "%s is not a regular file", path.c_str());
    }
    size_ = static_cast<size_t>(size);
    if (size_ == 0) return;
    void *p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_.get(), 0);
    if (p == MAP_FAILED) {
        err = errno;
        reset();
        fail_errno(err, "cannot map %s", path.c_str());
    }
    data_ = static_cast<const uint8_t *>(p);
}

MappedFile::~MappedFile() { reset(); }

MappedFile::MappedFile(MappedFile &&other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), fd_(std::move(other.fd_)) {}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
    if (this != &other) {
        reset();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        fd_ = std::move(other.fd_);
    }
    return *this;
}

void MappedFile::reset() noexcept {
    if (data_) ::munmap(const_cast<uint8_t *>(data_), size_);
    fd_.reset();
    data_ = nullptr;
    size_ = 0;
}

namespace {
// madvise needs a page-aligned start; widen the range to whole pages inside the mapping.
void advise(const uint8_t *base, size_t size, uint64_t offset, uint64_t length, int advice) {
    if (!base || offset >= size) return;
    if (length > size - offset) length = size - offset;
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t start = offset / page * page;
    ::madvise(const_cast<uint8_t *>(base) + start, offset + length - start, advice);
}
}  // namespace

void MappedFile::advise_willneed(uint64_t offset, uint64_t length) const {
    advise(data_, size_, offset, length, MADV_WILLNEED);
}

void MappedFile::advise_dontneed(uint64_t offset, uint64_t length) const {
    advise(data_, size_, offset, length, MADV_DONTNEED);
}

bool MappedFile::advise_huge_pages() const {
    return moe::advise_huge_pages(const_cast<uint8_t *>(data_), size_);
}

}  // namespace moe
