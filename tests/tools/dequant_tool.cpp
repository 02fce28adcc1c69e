// dequant_tool TYPE_ID IN.bin OUT.f32
// Dequantises raw blocks of a GGML type (the whole input file) to float32
// little-endian, for comparison against an independent dequantiser.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/error.hpp"
#include "common/ggml_types.hpp"
#include "kernels/kernels.hpp"

int main(int argc, char **argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s TYPE_ID IN.bin OUT.f32\n", argv[0]);
        return 2;
    }
    try {
        char *end = nullptr;
        const unsigned long id = std::strtoul(argv[1], &end, 10);
        const moe::TypeTraits &tr = moe::type_traits(static_cast<uint32_t>(id));
        if (!end || *end || !tr.name || !tr.weight_supported) {
            std::fprintf(stderr, "dequant_tool: unsupported type id '%s'\n", argv[1]);
            return 2;
        }
        std::ifstream in(argv[2], std::ios::binary);
        if (!in) {
            std::fprintf(stderr, "dequant_tool: cannot open %s\n", argv[2]);
            return 1;
        }
        std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (raw.size() % tr.block_bytes != 0) {
            std::fprintf(stderr, "dequant_tool: %s is %zu bytes, not a multiple of the %s block (%u bytes)\n",
                         argv[2], raw.size(), tr.name, tr.block_bytes);
            return 1;
        }
        const int64_t n = static_cast<int64_t>(raw.size() / tr.block_bytes * tr.block_elems);
        std::vector<float> out(static_cast<size_t>(n));
        moe::kernels::dequantize_row(static_cast<moe::GgmlType>(id), raw.data(), out.data(), n);
        std::ofstream os(argv[3], std::ios::binary | std::ios::trunc);
        os.write(reinterpret_cast<const char *>(out.data()), static_cast<std::streamsize>(out.size() * 4));
        if (!os) {
            std::fprintf(stderr, "dequant_tool: cannot write %s\n", argv[3]);
            return 1;
        }
        return 0;
    } catch (const moe::Error &e) {
        std::fprintf(stderr, "dequant_tool: %s\n", e.what());
        return 1;
    }
}
