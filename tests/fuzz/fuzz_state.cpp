// libFuzzer target for the state file reader (src/runtime/state_file.cpp).
//
// Each input is parsed twice:
//  1. as it is, against the shape its own header declares, so every check
//     from magic to checksum is exercised;
//  2. with its checksum recomputed, so mutations reach the fingerprint, shape
//     and section checks that a random flip would otherwise never pass.
// Whatever the bytes, the reader must either throw moe::Error or return views
// that lie inside the image and have the lengths the shape implies. A sampler
// section goes on through the sampler section decoder and into a sampler.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "runtime/sampler_state.hpp"
#include "runtime/state_file.hpp"

namespace {

using namespace moe::state;

// The shape a context would supply for a file with this header, or false if
// no context could have that shape (the reader is never asked about those).
bool plausible_shape(std::span<const uint8_t> image, StateShape &out) {
    RawHeader raw;
    if (!peek_header(image, raw)) return false;
    out = raw.shape;
    if (out.n_layer == 0 || out.n_layer > MOESTREAM_MAX_LAYERS) return false;
    const moe::TypeTraits &tr = moe::type_traits(static_cast<uint32_t>(out.kv_type));
    if (!tr.name || tr.block_elems != 1) return false;  // KV caches hold float elements
    if (out.n_head_kv > 4096 || out.head_dim_k > 4096 || out.head_dim_v > 4096) return false;
    const uint64_t k = uint64_t(out.n_head_kv) * out.head_dim_k * tr.block_bytes;
    const uint64_t v = uint64_t(out.n_head_kv) * out.head_dim_v * tr.block_bytes;
    out.k_row_bytes.assign(out.n_layer, k);
    out.v_row_bytes.assign(out.n_layer, v);
    // Some inputs exercise latent-attention shapes: odd layers keep no V.
    if (raw.shape.kv_layout & 0x100)
        for (uint32_t l = 1; l < out.n_layer; l += 2) out.v_row_bytes[l] = 0;
    // Others have sliding-window layers: the even ones see a few positions (format version 2).
    if (raw.shape.kv_layout & 0x200) {
        out.window.assign(out.n_layer, 0);
        for (uint32_t l = 0; l < out.n_layer; l += 2) out.window[l] = 1 + (raw.shape.kv_layout >> 12 & 7);
    }
    return true;
}

bool inside(const std::vector<uint8_t> &image, const void *p, size_t n) {
    const auto *b = static_cast<const uint8_t *>(p);
    if (n == 0) return true;
    return b >= image.data() && b + n <= image.data() + image.size();
}

void check_result(const LoadedState &s, const StateShape &shape) {
    bool ok = s.tokens.size() == s.n_past && s.positions.size() == s.n_past && s.n_past <= shape.n_ctx &&
              s.k.size() == shape.n_layer && s.v.size() == shape.n_layer &&
              inside(s.image, s.tokens.data(), s.tokens.size_bytes()) &&
              inside(s.image, s.positions.data(), s.positions.size_bytes()) &&
              inside(s.image, s.sampler.data(), s.sampler.size());
    ok = ok && s.rows.size() == shape.n_layer;
    for (uint32_t l = 0; ok && l < shape.n_layer; ++l) {
        // All n_past rows, or for a window at least the window - 1 last ones.
        const uint32_t window = shape.window.empty() ? 0 : shape.window[l];
        const uint32_t needed = window == 0 ? s.n_past : std::min(s.n_past, window - 1);
        ok = s.rows[l] <= s.n_past && s.rows[l] >= needed && (window != 0 || s.rows[l] == s.n_past) &&
             (s.version == 2 || s.rows[l] == s.n_past) &&
             s.k[l].size() == uint64_t(s.rows[l]) * shape.k_row_bytes[l] &&
             s.v[l].size() == uint64_t(s.rows[l]) * shape.v_row_bytes[l] &&
             inside(s.image, s.k[l].data(), s.k[l].size()) && inside(s.image, s.v[l].data(), s.v[l].size());
    }
    for (uint32_t t = 0; ok && t < s.n_past; ++t)
        ok = s.tokens[t] >= 0 && uint32_t(s.tokens[t]) < shape.n_vocab && s.positions[t] >= 0 &&
             uint32_t(s.positions[t]) < shape.n_ctx && (t == 0 || s.positions[t] > s.positions[t - 1]);
    if (!ok) __builtin_trap();
}

void parse_once(std::vector<uint8_t> image, const StateShape &shape) {
    try {
        const LoadedState s = parse_state(std::move(image), shape, "fuzz");
        check_result(s, shape);
        // What loading into a sampler does next; a snapshot it accepts must restore.
        if (s.has_sampler) {
            moe::Sampler sampler(moe::SamplerParams{});
            sampler.restore(moe::decode_sampler_section(s.sampler, "fuzz"));
        }
    } catch (const moe::Error &e) {
        if (e.status() == moe::Status::internal) __builtin_trap();  // the reader blamed itself
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::vector<uint8_t> image(data, data + size);
    StateShape shape;
    if (!plausible_shape(image, shape)) {
        // Still feed the reader something: a shape that cannot match.
        shape = StateShape{};
        shape.n_layer = 1;
        shape.k_row_bytes = {4};
        shape.v_row_bytes = {4};
        parse_once(std::move(image), shape);
        return 0;
    }
    parse_once(image, shape);
    const uint64_t sum = compute_checksum(image);
    std::memcpy(image.data() + kChecksumOffset, &sum, sizeof sum);
    parse_once(std::move(image), shape);
    return 0;
}
