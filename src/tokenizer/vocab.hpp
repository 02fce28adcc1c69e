// A tokenizer vocabulary read from GGUF metadata (tokenizer.ggml.*): token
// texts, scores and types, BPE merge ranks, special ids and the add_bos /
// add_eos / add_space_prefix flags. Everything is copied out of the file, so
// a Vocab outlives the GgufFile it came from. Every count, id and merge is
// checked; bad metadata throws bad_format naming the key and index.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moe::gguf {
class GgufFile;
}

namespace moe::tok {

enum class VocabKind { bpe, spm };

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t { undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

// One BPE merge: its rank (lower merges first) and the id of the merged text.
struct MergeRule {
    int32_t rank = 0;
    int32_t result = 0;
};

class Vocab {
public:
    // Throws unsupported when the file has no tokenizer (tokenizer.ggml.model
    // absent or "none") or a model kind other than gpt2 / llama.
    static std::unique_ptr<const Vocab> from_gguf(const gguf::GgufFile &file);
    Vocab(const Vocab &) = delete;
    Vocab &operator=(const Vocab &) = delete;
    // True when the file declares a tokenizer this code could try to load.
    static bool present_in(const gguf::GgufFile &file);

    VocabKind kind() const { return kind_; }
    const std::string &pre() const { return pre_; }
    int32_t n_tokens() const { return int32_t(types_.size()); }
    std::string_view text(int32_t id) const { return {arena_.data() + offsets_[size_t(id)], offsets_[size_t(id) + 1] - offsets_[size_t(id)]}; }
    TokenType type(int32_t id) const { return types_[size_t(id)]; }
    float score(int32_t id) const { return scores_.empty() ? 0.0f : scores_[size_t(id)]; }
    // The token with exactly this text, or -1.
    int32_t find(std::string_view text) const;

    // BPE merges work on "symbol ids": token ids, plus ids >= n_tokens() for
    // merge operands and results that are not tokens themselves.
    int32_t symbol_id(std::string_view text) const;
    const MergeRule *merge(int32_t left, int32_t right) const;
    // True for a vocabulary whose merge order is its token order, as in
    // tiktoken, where a token's id is its merge rank: a kimi-k2 vocabulary
    // without tokenizer.ggml.merges. Two adjacent symbols then merge when
    // their joined text is a mergeable token, the lowest id first.
    bool merges_by_token_id() const { return merges_by_token_id_; }
    // A token that is neither matched literally (control, user-defined,
    // unknown) nor unused.
    bool mergeable(int32_t id) const {
        const TokenType t = types_[size_t(id)];
        return t == TokenType::normal || t == TokenType::undefined;
    }

    int32_t bos() const { return bos_; }  // -1 when none
    int32_t eos() const { return eos_; }
    int32_t unk() const { return unk_; }
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    bool add_space_prefix() const { return add_space_prefix_; }

    // Tokens matched literally in raw text (control, user-defined, unknown),
    // longest text first.
    const std::vector<int32_t> &special_tokens() const { return special_; }

private:
    Vocab() = default;
    void load_tokens(const gguf::GgufFile &file);
    void load_merges(const gguf::GgufFile &file);
    void load_special_ids(const gguf::GgufFile &file);
    int32_t intern(std::string_view text);

    VocabKind kind_ = VocabKind::bpe;
    std::string pre_;
    std::vector<char> arena_;        // all token texts back to back
    std::vector<size_t> offsets_;    // n_tokens + 1 offsets into arena_
    std::vector<TokenType> types_;
    std::vector<float> scores_;
    std::unordered_map<std::string_view, int32_t> by_text_;      // into arena_
    std::deque<std::string> extra_symbols_;                       // merge texts that are not tokens
    std::unordered_map<std::string_view, int32_t> extra_by_text_; // into extra_symbols_
    std::unordered_map<uint64_t, MergeRule> merges_;
    std::vector<int32_t> special_;
    int32_t bos_ = -1, eos_ = -1, unk_ = -1;
    bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = true;
    bool merges_by_token_id_ = false;
};

}  // namespace moe::tok
