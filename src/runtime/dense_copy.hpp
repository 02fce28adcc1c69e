// The dense weight matrices (attention, routers, shared experts, output
// head) read out of the GGUF at open into memory the engine owns, when the
// routed experts are streamed.
//
// Why a copy rather than the file mapping: the mapping's pages belong to the
// page cache, which the kernel reclaims under memory pressure (they are clean
// and file-backed, the cheapest pages to drop), and every token reads all of
// them again; anonymous memory can only be swapped. It is also the only way
// to place them by NUMA policy (page-cache pages are placed where the reading
// thread happens to run) and to have them backed by huge pages reliably. The
// reads use O_DIRECT where the filesystem allows it, and buffered reads drop
// their pages from the page cache afterwards, so the bytes are not held
// twice. When the experts are served from the mapping (mmap mode) the dense
// weights stay there too: the file is meant to fit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/numa_memory.hpp"
#include "gguf/gguf_file.hpp"
#include "io/read_backend.hpp"
#include "model/tensor_roles.hpp"

namespace moe::io {
class DirectFallbackBackend;
}

namespace moe {

class DenseCopy {
public:
    // Which dense tensors to copy (null: all of them).
    using Filter = std::function<bool(const gguf::TensorInfo &)>;

    // Reads the dense tensors of `file` that `filter` takes into one buffer
    // placed by `placement`: with `direct`, O_DIRECT reads (where the
    // filesystem takes them) through the automatic backend, else buffered
    // reads through the pread backend, as the expert reads of the direct and
    // pread modes do. `backend` replaces that backend (tests). Throws
    // moe::Error(io) naming the file and offset when a read fails or comes
    // back short, out_of_memory when the buffer cannot be had. No read is
    // left in flight when it throws.
    DenseCopy(const gguf::GgufFile &file, NumaPlacement placement, bool direct, const Filter &filter = nullptr,
              std::unique_ptr<io::ReadBackend> backend = nullptr);

    // Whether the byte the file mapping holds at `mapped` lies in a copied tensor.
    bool contains(const uint8_t *mapped) const { return find(mapped) != nullptr; }
    // Its copy; throws moe::Error(internal) for an address not in a copied tensor.
    const uint8_t *relocate(const uint8_t *mapped) const;

    uint64_t tensor_bytes() const { return tensor_bytes_; }  // bytes of the copied tensors
    uint64_t bytes_read() const { return bytes_read_; }      // with the gaps and alignment around each run
    double seconds() const { return seconds_; }
    bool direct() const { return direct_; }                  // every shard was read with O_DIRECT
    // For logs: "dense weights copied in (829 MiB in 0.41 s, O_DIRECT; node 0, huge pages)".
    std::string describe() const;

private:
    struct Run {
        DenseRun where;
        uint8_t *copy = nullptr;  // where the buffer holds the run's first byte
    };
    struct Tensor {
        const uint8_t *mapped = nullptr;
        uint64_t length = 0;
        const uint8_t *copy = nullptr;
    };
    void read_runs(const gguf::GgufFile &file, io::DirectFallbackBackend &backend, bool want_direct);
    const uint8_t *find(const uint8_t *mapped) const;

    NumaBuffer memory_;
    std::vector<Run> runs_;
    std::vector<Tensor> tensors_;  // ascending by `mapped`
    uint64_t tensor_bytes_ = 0;
    uint64_t bytes_read_ = 0;
    double seconds_ = 0;
    bool direct_ = false;
};

}  // namespace moe
