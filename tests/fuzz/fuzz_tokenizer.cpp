// Fuzz target: the tokenizer, on arbitrary text and on arbitrary vocabularies.
// The first input byte picks the mode:
//   even: the rest is text for one of four built-in vocabularies (byte-level
//         BPE with the qwen2 and deepseek-llm pre-tokenizers, kimi-k2 without
//         merges, merging by token id; SPM); valid UTF-8 must come back byte
//         for byte from BPE tokens;
//   odd:  the rest is a GGUF image whose tokenizer metadata is loaded and
//         then used on fixed texts.
// Only moe::Error is an acceptable failure; anything else is a bug.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"
#include "../unit/support/vocab_tokens.hpp"

namespace {

using moe::test::byte_level;
using moe::test::VocabTokens;

// A GGUF v3 image holding only metadata.
class MetadataImage {
public:
    void string(const std::string &key, const std::string &v) {
        begin(key, 8);
        str(v);
    }
    void u32(const std::string &key, uint32_t v) {
        begin(key, 4);
        le(v, 4);
    }
    void strings(const std::string &key, const std::vector<std::string> &v) {
        begin(key, 9);
        le(8, 4);
        le(v.size(), 8);
        for (const std::string &s : v) str(s);
    }
    void i32s(const std::string &key, const std::vector<int32_t> &v) {
        begin(key, 9);
        le(5, 4);
        le(v.size(), 8);
        for (int32_t x : v) le(uint32_t(x), 4);
    }
    void f32s(const std::string &key, const std::vector<float> &v) {
        begin(key, 9);
        le(6, 4);
        le(v.size(), 8);
        for (float x : v) {
            uint32_t bits;
            std::memcpy(&bits, &x, 4);
            le(bits, 4);
        }
    }
    std::vector<uint8_t> bytes() const {
        std::vector<uint8_t> out = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
        for (int i = 0; i < 8; ++i) out.push_back(0);  // no tensors
        for (int i = 0; i < 8; ++i) out.push_back(uint8_t(uint64_t(n_kv_) >> (8 * i)));
        out.insert(out.end(), kv_.begin(), kv_.end());
        return out;
    }

private:
    void le(uint64_t v, int n) {
        for (int i = 0; i < n; ++i) kv_.push_back(uint8_t(v >> (8 * i)));
    }
    void str(const std::string &s) {
        le(s.size(), 8);
        kv_.insert(kv_.end(), s.begin(), s.end());
    }
    void begin(const std::string &key, uint32_t type) {
        ++n_kv_;
        str(key);
        le(type, 4);
    }
    std::vector<uint8_t> kv_;
    size_t n_kv_ = 0;
};

std::unique_ptr<moe::tok::Tokenizer> from_image(const std::vector<uint8_t> &image) {
    const auto file = moe::gguf::GgufFile::parse_memory(image.data(), image.size(), "fuzz-vocab.gguf");
    return moe::tok::Tokenizer::from_gguf(*file);
}

std::unique_ptr<moe::tok::Tokenizer> make_bpe(const char *pre, bool with_merges = true) {
    VocabTokens v = moe::test::byte_level_tokens();
    std::vector<std::string> merges;
    const char *letters = "etaoinshrdlu";
    for (const char *a = letters; *a; ++a)
        for (const char *b = letters; *b; ++b) {
            merges.push_back(std::string(1, *a) + " " + std::string(1, *b));
            v.add(std::string(1, *a) + *b, moe::test::kNormal);
        }
    for (const char *a = letters; *a; ++a) {
        merges.push_back(byte_level(" ") + " " + std::string(1, *a));
        v.add(byte_level(" ") + *a, moe::test::kNormal);
    }
    for (const char *s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) v.add(s, moe::test::kControl);
    v.add("<tool>", moe::test::kUserDefined);
    MetadataImage m;
    m.string("tokenizer.ggml.model", "gpt2");
    m.string("tokenizer.ggml.pre", pre);
    m.strings("tokenizer.ggml.tokens", v.tokens);
    m.i32s("tokenizer.ggml.token_type", v.types);
    if (with_merges) m.strings("tokenizer.ggml.merges", merges);
    m.u32("tokenizer.ggml.bos_token_id", uint32_t(v.tokens.size() - 4));
    return from_image(m.bytes());
}

std::unique_ptr<moe::tok::Tokenizer> make_spm() {
    VocabTokens v = moe::test::spm_byte_fallback_tokens();
    const std::string sp = "\xE2\x96\x81";
    moe::test::add_scored_pieces(v, {sp, sp + "t", "th", sp + "th", "he", sp + "the", "a", "e", "h", "t", "n", "an"});
    MetadataImage m;
    m.string("tokenizer.ggml.model", "llama");
    m.strings("tokenizer.ggml.tokens", v.tokens);
    m.i32s("tokenizer.ggml.token_type", v.types);
    m.f32s("tokenizer.ggml.scores", v.scores);
    return from_image(m.bytes());
}

const moe::tok::Tokenizer &builtin(uint8_t selector) {
    static const auto qwen2 = make_bpe("qwen2");
    static const auto deepseek = make_bpe("deepseek-llm");
    static const auto kimi = make_bpe("kimi-k2", false);
    static const auto spm = make_spm();
    switch ((selector >> 1) % 4) {
    case 0: return *qwen2;
    case 1: return *deepseek;
    case 2: return *kimi;
    default: return *spm;
    }
}

void check_text(const moe::tok::Tokenizer &tok, std::string_view text, uint8_t flags) {
    std::vector<int32_t> ids;
    const bool add_special = flags & 8, parse_special = flags & 16;
    try {
        tok.tokenize(text, add_special, parse_special, ids);
    } catch (const moe::Error &) {
        if (moe::tok::is_valid_utf8(text)) std::abort();  // valid text must tokenize
        return;
    }
    for (int32_t id : ids)
        if (id < 0 || id >= tok.n_tokens()) std::abort();
    const std::string back = tok.detokenize(ids);
    // Byte-level BPE loses nothing (control tokens come back as their text).
    if (tok.vocab().kind() == moe::tok::VocabKind::bpe && !add_special && back != text) std::abort();
}

void check_vocab_image(const uint8_t *data, size_t size) {
    std::unique_ptr<moe::tok::Tokenizer> tok;
    try {
        const auto file = moe::gguf::GgufFile::parse_memory(data, size, "fuzz.gguf");
        tok = moe::tok::Tokenizer::from_gguf(*file);
    } catch (const moe::Error &) {
        return;
    }
    std::vector<int32_t> ids;
    for (const char *text : {"", "Hello world", " a  b\n\n c\t", "日本語 🦙 ünï 123456", "<s>x</s><|im_start|>"}) {
        for (int mode = 0; mode < 4; ++mode) {
            try {
                tok->tokenize(text, mode & 1, mode & 2, ids);
            } catch (const moe::Error &) {
                continue;  // e.g. an SPM vocabulary without byte tokens
            }
            for (int32_t id : ids)
                if (id < 0 || id >= tok->n_tokens()) std::abort();
        }
    }
    std::string piece;
    const int32_t n = std::min(tok->n_tokens(), 4096);
    for (int32_t id = 0; id < n; ++id) tok->append_piece(id, piece);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const uint8_t mode = data[0];
    if (mode & 1) check_vocab_image(data + 1, size - 1);
    else check_text(builtin(mode), std::string_view(reinterpret_cast<const char *>(data + 1), size - 1), mode);
    return 0;
}
