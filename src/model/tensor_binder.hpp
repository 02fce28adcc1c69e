// Binds GGUF tensors by name, checking shape and type, and records which
// tensors were bound so that leftovers can be reported.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "model/weights.hpp"

namespace moe {

class TensorBinder {
public:
    explicit TensorBinder(const gguf::GgufFile &file);

    // "blk.<layer>.<suffix>"
    static std::string layer_name(int32_t layer, const char *suffix);

    bool has(const std::string &name) const;
    // A 2-D matrix with ne = [cols, rows]. Throws bad_format naming the tensor
    // and the expected shape when missing (and required) or mis-shaped, and
    // unsupported when its type cannot be computed with.
    MatrixView matrix(const std::string &name, int64_t cols, int64_t rows, bool required = true);
    // A 1-D tensor of n elements converted to f32 (accepts [n] or [n,1]).
    VectorF32 vector(const std::string &name, int64_t n, bool required = true);
    // A 3-D expert tensor with ne = [cols, rows, n_expert]. Every shape check
    // ignores trailing dimensions of 1 (TensorInfo::fits_dims), as
    // is_expert_tensor does, so binding and byte accounting agree.
    ExpertMatrixLayout experts(const std::string &name, int64_t cols, int64_t rows, int64_t n_expert,
                               bool required = true);

    const gguf::GgufFile &file() const { return file_; }

    // The file's tensors no call above has bound, in file order.
    std::vector<const gguf::TensorInfo *> unbound() const;

private:
    const gguf::TensorInfo &lookup(const std::string &name);
    void check_type(const gguf::TensorInfo &t) const;
    const gguf::GgufFile &file_;
    std::vector<bool> bound_;  // per file tensor
};

}  // namespace moe
