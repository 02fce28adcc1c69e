#include "model/tensor_binder.hpp"

#include "common/error.hpp"
#include "kernels/kernels.hpp"

namespace moe {
namespace {

std::string shape_string(const int64_t *ne, uint32_t n_dims) {
    std::string s = "[";
    for (uint32_t i = 0; i < n_dims; ++i) {
        if (i) s += ", ";
        s += std::to_string(ne[i]);
    }
    return s + "]";
}

// A 3-D tensor of ne = [cols, rows, count] (trailing 1s allowed).
void check_3d(const gguf::GgufFile &file, const gguf::TensorInfo &t, int64_t cols, int64_t rows, int64_t count) {
    if (t.ne[0] != cols || t.ne[1] != rows || t.ne[2] != count || !t.fits_dims(3))
        fail(Status::bad_format, "%s: tensor '%s' has shape %s; expected [%lld, %lld, %lld]", file.path().c_str(),
             t.name.c_str(), shape_string(t.ne, t.n_dims).c_str(), static_cast<long long>(cols),
             static_cast<long long>(rows), static_cast<long long>(count));
}

}  // namespace

TensorBinder::TensorBinder(const gguf::GgufFile &file, Values values)
    : file_(file), values_(values), bound_(file.tensors().size(), false), derived_(values == Values::read) {}

std::string TensorBinder::layer_name(int32_t layer, const char *suffix) {
    return "blk." + std::to_string(layer) + "." + suffix;
}

bool TensorBinder::has(const std::string &name) const { return file_.tensor(name) != nullptr; }

const gguf::TensorInfo &TensorBinder::lookup(const std::string &name) {
    const gguf::TensorInfo *t = file_.tensor(name);
    if (!t) fail(Status::bad_format, "%s: tensor '%s' is missing", file_.path().c_str(), name.c_str());
    bound_[size_t(t - file_.tensors().data())] = true;
    return *t;
}

std::vector<const gguf::TensorInfo *> TensorBinder::unbound() const {
    std::vector<const gguf::TensorInfo *> out;
    for (size_t i = 0; i < bound_.size(); ++i)
        if (!bound_[i]) out.push_back(&file_.tensors()[i]);
    return out;
}

void TensorBinder::check_type(const gguf::TensorInfo &t) const {
    const TypeTraits &tr = type_traits(t.type);
    if (!tr.name || !tr.weight_supported)
        fail(Status::unsupported, "%s: tensor '%s' has type %s (id %u), which this build cannot compute with",
             file_.path().c_str(), t.name.c_str(), tr.name ? tr.name : "unknown",
             static_cast<unsigned>(t.type));
    if (t.ne[0] % tr.block_elems != 0)
        fail(Status::bad_format, "%s: tensor '%s' rows of %lld elements are not a multiple of the %s block (%u)",
             file_.path().c_str(), t.name.c_str(), static_cast<long long>(t.ne[0]), tr.name, tr.block_elems);
}

MatrixView TensorBinder::matrix(const std::string &name, int64_t cols, int64_t rows, bool required) {
    if (!required && !has(name)) return {};
    const gguf::TensorInfo &t = lookup(name);
    const bool shape_ok = t.ne[0] == cols && t.ne[1] == rows && t.fits_dims(2);
    if (!shape_ok)
        fail(Status::bad_format, "%s: tensor '%s' has shape %s; expected [%lld, %lld]", file_.path().c_str(),
             name.c_str(), shape_string(t.ne, t.n_dims).c_str(), static_cast<long long>(cols),
             static_cast<long long>(rows));
    check_type(t);
    MatrixView m;
    m.data = t.data;
    m.type = t.type;
    m.cols = cols;
    m.rows = rows;
    m.row_bytes = t.row_bytes();
    return m;
}

MatrixView TensorBinder::source_matrix(const std::string &name, int64_t cols, int64_t rows) {
    const MatrixView m = matrix(name, cols, rows);
    consumed_bytes_ += file_.tensor(name)->nbytes;
    return m;
}

MatrixView TensorBinder::stacked_matrices(const std::string &name, int64_t cols, int64_t rows, int64_t count) {
    const gguf::TensorInfo &t = lookup(name);
    check_3d(file_, t, cols, rows, count);
    check_type(t);
    MatrixView m;
    m.data = t.data;
    m.type = t.type;
    m.cols = cols;
    m.rows = rows * count;
    m.row_bytes = t.row_bytes();
    return m;
}

VectorF32 TensorBinder::vector(const std::string &name, int64_t n, bool required) {
    return bind_vector(name, n, required, values_);
}

VectorF32 TensorBinder::checked_vector(const std::string &name, int64_t n, bool required) {
    return bind_vector(name, n, required, Values::read);
}

VectorF32 TensorBinder::bind_vector(const std::string &name, int64_t n, bool required, Values values) {
    if (!required && !has(name)) return {};
    const gguf::TensorInfo &t = lookup(name);
    if (t.ne[0] != n || !t.fits_dims(1))
        fail(Status::bad_format, "%s: tensor '%s' has shape %s; expected [%lld]", file_.path().c_str(),
             name.c_str(), shape_string(t.ne, t.n_dims).c_str(), static_cast<long long>(n));
    check_type(t);
    return convert(t, n, values);
}

VectorF32 TensorBinder::table(const std::string &name, int64_t cols, int64_t rows, bool required) {
    if (!required && !has(name)) return {};
    const gguf::TensorInfo &t = lookup(name);
    if (t.ne[0] != cols || t.ne[1] != rows || !t.fits_dims(2))
        fail(Status::bad_format, "%s: tensor '%s' has shape %s; expected [%lld, %lld]", file_.path().c_str(),
             name.c_str(), shape_string(t.ne, t.n_dims).c_str(), static_cast<long long>(cols),
             static_cast<long long>(rows));
    check_type(t);
    return convert(t, cols * rows, values_);
}

VectorF32 TensorBinder::convert(const gguf::TensorInfo &t, int64_t n, Values values) const {
    if (values == Values::skip) return {};
    VectorF32 v(static_cast<size_t>(n));
    kernels::dequantize_row(t.type, t.data, v.data(), n);
    return v;
}

ExpertMatrixLayout TensorBinder::experts(const std::string &name, int64_t cols, int64_t rows,
                                         int64_t n_expert, bool required) {
    if (!required && !has(name)) return {};
    const gguf::TensorInfo &t = lookup(name);
    check_3d(file_, t, cols, rows, n_expert);
    check_type(t);
    ExpertMatrixLayout m;
    m.type = t.type;
    m.cols = cols;
    m.rows = rows;
    m.shard = t.shard;
    m.file_offset = t.file_offset;
    m.expert_stride = t.row_bytes() * uint64_t(rows);
    m.mapped = t.data;
    return m;
}

}  // namespace moe
