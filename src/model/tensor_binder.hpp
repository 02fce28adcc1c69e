// Binds GGUF tensors by name, checking shape and type, and records which
// tensors were bound so that leftovers can be reported. Every check reads
// only the tensor table; converting 1-D tensors to f32 is the one read of
// tensor data, and a binder that only checks (Values::skip) leaves it out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "model/derived_matrices.hpp"
#include "model/weights.hpp"

namespace moe {

class TensorBinder {
public:
    // What vector() returns: the tensor converted to f32 (read), or nothing
    // (skip: the same checks and errors, no tensor data read).
    enum class Values { read, skip };
    explicit TensorBinder(const gguf::GgufFile &file, Values values = Values::read);

    // "blk.<layer>.<suffix>"
    static std::string layer_name(int32_t layer, const char *suffix);

    bool has(const std::string &name) const;
    // A 2-D matrix with ne = [cols, rows]. Throws bad_format naming the tensor
    // and the expected shape when missing (and required) or mis-shaped, and
    // unsupported when its type cannot be computed with.
    MatrixView matrix(const std::string &name, int64_t cols, int64_t rows, bool required = true);
    // A 3-D tensor with ne = [cols, rows, count] (count matrices one after
    // another, e.g. one per attention head) as one matrix of count * rows
    // rows; MatrixView::rows_from takes out one of them.
    MatrixView stacked_matrices(const std::string &name, int64_t cols, int64_t rows, int64_t count);
    // A 1-D tensor of n elements converted to f32 (accepts [n] or [n,1]);
    // empty when optional and absent, or when the binder skips values.
    VectorF32 vector(const std::string &name, int64_t n, bool required = true);
    // A 2-D tensor with ne = [cols, rows] converted to f32 as vector() does
    // (row r at r * cols): small per-expert tables such as expert biases.
    VectorF32 table(const std::string &name, int64_t cols, int64_t rows, bool required = true);
    // As vector(), but converted whatever the binder's Values: for the few
    // small tensors whose values binding checks (rope_freqs).
    VectorF32 checked_vector(const std::string &name, int64_t n, bool required = true);
    // A 3-D expert tensor with ne = [cols, rows, n_expert]. Every shape check
    // ignores trailing dimensions of 1 (TensorInfo::fits_dims), as
    // is_expert_tensor does, so binding and byte accounting agree.
    ExpertMatrixLayout experts(const std::string &name, int64_t cols, int64_t rows, int64_t n_expert,
                               bool required = true);

    // A 2-D tensor read at open to build other matrices (derived()), checked
    // and bound as matrix() does, but not kept: once the model is open its
    // bytes are not resident (consumed_bytes()).
    MatrixView source_matrix(const std::string &name, int64_t cols, int64_t rows);
    uint64_t consumed_bytes() const { return consumed_bytes_; }
    // Where the matrices built from source matrices go: with memory when the
    // binder reads values, their bytes counted only when it skips them.
    DerivedMatrices &derived() { return derived_; }

    const gguf::GgufFile &file() const { return file_; }

    // The file's tensors no call above has bound, in file order.
    std::vector<const gguf::TensorInfo *> unbound() const;

private:
    const gguf::TensorInfo &lookup(const std::string &name);
    void check_type(const gguf::TensorInfo &t) const;
    VectorF32 bind_vector(const std::string &name, int64_t n, bool required, Values values);
    VectorF32 convert(const gguf::TensorInfo &t, int64_t n, Values values) const;
    const gguf::GgufFile &file_;
    Values values_;
    std::vector<bool> bound_;  // per file tensor
    DerivedMatrices derived_;
    uint64_t consumed_bytes_ = 0;
};

}  // namespace moe
