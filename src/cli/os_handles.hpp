// RAII for the CLI's own system resources (it uses only the public header, so
// it does not borrow the library's internal file classes): a file descriptor
// closed and a mapping unmapped on every path out of their scope.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <utility>

namespace cli {

class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(UniqueFd &&other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    UniqueFd &operator=(UniqueFd &&other) noexcept {
        if (this != &other) {
            reset();
            fd_ = std::exchange(other.fd_, -1);
        }
        return *this;
    }
    UniqueFd(const UniqueFd &) = delete;
    UniqueFd &operator=(const UniqueFd &) = delete;

    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }
    // Closes now (a forked child closes the end it does not use).
    void reset() noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
};

class UniqueMapping {
public:
    // Takes what mmap returned; MAP_FAILED makes an empty object.
    UniqueMapping(void *data, size_t size) : data_(data == MAP_FAILED ? nullptr : data), size_(size) {}
    ~UniqueMapping() {
        if (data_) ::munmap(data_, size_);
    }
    UniqueMapping(const UniqueMapping &) = delete;
    UniqueMapping &operator=(const UniqueMapping &) = delete;

    void *data() const { return data_; }
    size_t size() const { return size_; }
    explicit operator bool() const { return data_ != nullptr; }

private:
    void *data_;
    size_t size_;
};

}  // namespace cli
