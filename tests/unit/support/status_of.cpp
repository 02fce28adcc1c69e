#include "support/status_of.hpp"

namespace moe::test {

Status status_of(const std::function<void()> &fn, std::string *message) {
    try {
        fn();
    } catch (const Error &e) {
        if (message) *message = e.what();
        return e.status();
    }
    return Status::ok;
}

}  // namespace moe::test
