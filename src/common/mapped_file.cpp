#include "common/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.hpp"
#include "common/huge_pages.hpp"

namespace moe {

MappedFile::MappedFile(const std::string &path) {
    // O_NONBLOCK: a named pipe would otherwise block the open until a writer
    // came, before the check below could refuse it. Reads of a regular file
    // and its mapping ignore the flag.
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) fail_errno(errno, "cannot open %s", path.c_str());
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        const int err = errno;
        reset();
        fail_errno(err, "cannot stat %s", path.c_str());
    }
    if (!S_ISREG(st.st_mode)) {
        reset();
        fail(Status::io, "%s is not a regular file", path.c_str());
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ == 0) return;
    void *p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
        const int err = errno;
        reset();
        fail_errno(err, "cannot map %s", path.c_str());
    }
    data_ = static_cast<const uint8_t *>(p);
}

MappedFile::~MappedFile() { reset(); }

MappedFile::MappedFile(MappedFile &&other) noexcept
    : data_(other.data_), size_(other.size_), fd_(other.fd_) {
    other.data_ = nullptr;
    other.size_ = 0;
    other.fd_ = -1;
}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
    if (this != &other) {
        reset();
        data_ = other.data_;
        size_ = other.size_;
        fd_ = other.fd_;
        other.data_ = nullptr;
        other.size_ = 0;
        other.fd_ = -1;
    }
    return *this;
}

void MappedFile::reset() noexcept {
    if (data_) ::munmap(const_cast<uint8_t *>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
    data_ = nullptr;
    size_ = 0;
    fd_ = -1;
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
