// Token lists for generated tokenizer vocabularies, shared by the tokenizer
// tests and the tokenizer fuzzer. Header-only: the fuzzer links neither
// GoogleTest nor the test support library.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/byte_unicode.hpp"

namespace moe::test {

// GGUF token types (tokenizer.ggml.token_type).
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6 };

// The parallel arrays of tokenizer.ggml.tokens, token_type and scores.
struct VocabTokens {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<float> scores;

    void add(std::string text, int32_t type, float score = 0) {
        tokens.push_back(std::move(text));
        types.push_back(type);
        scores.push_back(score);
    }
};

// `s` in the byte-level alphabet of GPT-2 style BPE.
inline std::string byte_level(std::string_view s) {
    std::string out;
    for (char c : s) out += moe::tok::byte_to_unicode(static_cast<uint8_t>(c));
    return out;
}

// Byte-level BPE: one normal token per byte, ids 0-255.
inline VocabTokens byte_level_tokens() {
    VocabTokens v;
    for (int b = 0; b < 256; ++b) v.add(std::string(moe::tok::byte_to_unicode(uint8_t(b))), kNormal);
    return v;
}

// SPM: <unk>, <s>, </s>, then the byte-fallback tokens <0x00>..<0xFF> (ids 3-258), all scoring 0.
inline VocabTokens spm_byte_fallback_tokens() {
    VocabTokens v;
    v.add("<unk>", kUnknown);
    v.add("<s>", kControl);
    v.add("</s>", kControl);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        v.add(name, kByte);
    }
    return v;
}

// Appends normal SPM pieces scoring -(vocabulary size after adding them):
// earlier pieces score higher.
inline void add_scored_pieces(VocabTokens &v, const std::vector<std::string> &pieces) {
    for (const std::string &p : pieces) {
        v.tokens.push_back(p);
        v.types.push_back(kNormal);
        v.scores.push_back(-float(v.tokens.size()));
    }
}

}  // namespace moe::test
