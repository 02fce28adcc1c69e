// The object behind a moestream_context handle, shared by the capi/ files
// that take a context.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/error.hpp"
#include "common/log.hpp"
#include "runtime/context.hpp"
#include "tokenizer/tokenizer.hpp"

struct moestream_context {
    std::unique_ptr<moe::Context> ctx;
    moe::Log log;  // the caller's moestream_params.log_fn
    // Set while a call is inside the context; a second thread finds it set and gets BUSY.
    std::atomic<bool> busy{false};
    // Built at open from the model's tokenizer metadata; when absent or
    // unusable, the tokenizer calls fail with tokenizer_status / tokenizer_error.
    std::unique_ptr<const moe::tok::Tokenizer> tokenizer;
    moe::Status tokenizer_status = moe::Status::unsupported;
    std::string tokenizer_error;
};

namespace moe::capi {

// Builds handle.tokenizer from the open model (api_tokenizer.cpp); never throws
// for tokenizer problems, which are recorded and reported by the tokenizer calls.
void attach_tokenizer(moestream_context &handle);

// Claims a context for the duration of one call; throws busy when another
// thread holds it and invalid_argument on NULL.
class ContextUse {
public:
    explicit ContextUse(const moestream_context *handle) : h_(const_cast<moestream_context *>(handle)) {
        if (!h_ || !h_->ctx) moe::fail(moe::Status::invalid_argument, "context is NULL");
        bool expected = false;
        if (!h_->busy.compare_exchange_strong(expected, true, std::memory_order_acquire))
            moe::fail(moe::Status::busy, "the context is in use by another thread");
    }
    ~ContextUse() { h_->busy.store(false, std::memory_order_release); }
    ContextUse(const ContextUse &) = delete;
    ContextUse &operator=(const ContextUse &) = delete;
    moe::Context &operator*() const { return *h_->ctx; }
    moe::Context *operator->() const { return h_->ctx.get(); }

private:
    moestream_context *h_;
};

}  // namespace moe::capi
