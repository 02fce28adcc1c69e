#include "tokenizer/tokenizer.hpp"

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "tokenizer/bpe.hpp"
#include "tokenizer/special_split.hpp"
#include "tokenizer/spm.hpp"
#include "tokenizer/token_piece.hpp"
#include "tokenizer/utf8.hpp"

namespace moe::tok {
namespace {

// Per-thread buffers: tokenizing allocates only while they grow.
struct Scratch {
    std::vector<Fragment> fragments, fragments_tmp;
    BpeScratch bpe;
    SpmScratch spm;
};

Scratch &scratch() {
    thread_local Scratch s;
    return s;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<const Vocab> vocab, const Log &log) : vocab_(std::move(vocab)) {
    if (vocab_->kind() == VocabKind::bpe) bpe_ = std::make_unique<BpeTokenizer>(*vocab_, log);
    else spm_ = std::make_unique<SpmTokenizer>(*vocab_);
}

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile &file, const Log &log) {
    return std::unique_ptr<Tokenizer>(new Tokenizer(Vocab::from_gguf(file), log));
}

std::unique_ptr<Tokenizer> Tokenizer::open_vocab_only(const std::string &path) {
    const std::unique_ptr<gguf::GgufFile> file = gguf::GgufFile::open(path);
    return from_gguf(*file);
}

void Tokenizer::tokenize(std::string_view text, bool add_special, bool parse_special,
                         std::vector<int32_t> &out) const {
    out.clear();
    const size_t bad = find_invalid_utf8(text);
    if (bad != std::string_view::npos)
        fail(Status::invalid_argument, "text is not valid UTF-8: byte 0x%02X at offset %zu of %zu",
             static_cast<unsigned>(static_cast<uint8_t>(text[bad])), bad, text.size());
    Scratch &s = scratch();
    if (add_special && vocab_->add_bos() && vocab_->bos() >= 0) out.push_back(vocab_->bos());
    split_special(*vocab_, text, parse_special, s.fragments, s.fragments_tmp);
    bool after_special = true;  // SPM puts a space in front of text that starts the input or follows a special token
    for (const Fragment &f : s.fragments) {
        if (f.token >= 0) {
            out.push_back(f.token);
            after_special = true;
            continue;
        }
        if (bpe_) bpe_->tokenize(text, {f.begin, f.end}, out, s.bpe);
        else spm_->tokenize(text.substr(f.begin, f.end - f.begin), vocab_->add_space_prefix() && after_special, out, s.spm);
        after_special = false;
    }
    if (add_special && vocab_->add_eos() && vocab_->eos() >= 0) out.push_back(vocab_->eos());
}

void Tokenizer::append_piece(int32_t id, std::string &out) const {
    if (id < 0 || id >= vocab_->n_tokens())
        fail(Status::invalid_argument, "token %d is outside the vocabulary [0, %d)", id, vocab_->n_tokens());
    append_token_bytes(*vocab_, id, out);
}

std::string Tokenizer::detokenize(const std::vector<int32_t> &ids) const {
    std::string out;
    for (int32_t id : ids) append_piece(id, out);
    return out;
}

}  // namespace moe::tok
