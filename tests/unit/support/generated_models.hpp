// Small generated models for the tests that run a Context, and the helpers
// those tests share to drive one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/context.hpp"

namespace moe::test {

// A model written by tests/tools/make_model.py with `--arch arch`, the shape
// arguments and `extra`, under <build>/test-scratch/<dir_name>. Generated once
// per (dir, arch, extra) and shared by the test processes ctest runs in
// parallel: written under a unique name and renamed into place. Returns ""
// when it cannot be generated (no python3 with numpy).
std::string generated_model(const std::string &dir_name, const std::string &arch, const std::string &shape_args,
                            const std::string &extra);

// Two threads, `n_ctx` positions, exact or fast kernels.
ContextParams context_params(const std::string &path, bool exact = false, int32_t n_ctx = 32);

// Steps `tokens` and returns the logits of the last one.
std::vector<float> step(Context &c, const std::vector<int32_t> &tokens);

}  // namespace moe::test

// Binds `var` to a generated model's path, or skips the test when there is none.
#define REQUIRE_GENERATED_MODEL(var, path_expr) \
    const std::string var = (path_expr);         \
    if (var.empty()) GTEST_SKIP() << "python3 with numpy is needed to generate models"
