// Text <-> token ids for a model's vocabulary: special-token matching, then
// byte-level BPE or SPM on the text between special tokens, and the reverse
// mapping of single tokens to bytes. Immutable after construction, so one
// Tokenizer serves concurrent callers (each thread has its own buffers).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.hpp"
#include "tokenizer/vocab.hpp"

namespace moe::gguf {
class GgufFile;
}

namespace moe::tok {

class BpeTokenizer;
class SpmTokenizer;

class Tokenizer {
public:
    // From a parsed model file; throws unsupported without tokenizer metadata
    // and bad_format / unsupported for metadata it cannot use. `log` hears of
    // what is built less well than it could be (regex_split.hpp).
    static std::unique_ptr<Tokenizer> from_gguf(const gguf::GgufFile &file, const Log &log = {});
    // Reads only the tokenizer metadata of a GGUF file (vocabulary-only files
    // without tensors included); the file is closed again before returning.
    static std::unique_ptr<Tokenizer> open_vocab_only(const std::string &path);
    ~Tokenizer();
    Tokenizer(const Tokenizer &) = delete;
    Tokenizer &operator=(const Tokenizer &) = delete;

    // Replaces `out` with the tokens of `text`. add_special: BOS / EOS as the
    // vocabulary asks; parse_special: match control tokens written in the
    // text. Throws invalid_argument naming the offset of invalid UTF-8.
    void tokenize(std::string_view text, bool add_special, bool parse_special, std::vector<int32_t> &out) const;
    // Appends the bytes token `id` stands for (control tokens give their
    // text); throws invalid_argument for ids outside the vocabulary.
    void append_piece(int32_t id, std::string &out) const;
    std::string detokenize(const std::vector<int32_t> &ids) const;

    const Vocab &vocab() const { return *vocab_; }
    int32_t n_tokens() const { return vocab_->n_tokens(); }
    int32_t bos() const { return vocab_->bos(); }
    int32_t eos() const { return vocab_->eos(); }

private:
    Tokenizer(std::unique_ptr<const Vocab> vocab, const Log &log);

    std::unique_ptr<const Vocab> vocab_;
    std::unique_ptr<BpeTokenizer> bpe_;
    std::unique_ptr<SpmTokenizer> spm_;
};

}  // namespace moe::tok
