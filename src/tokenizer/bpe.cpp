#include "tokenizer/bpe.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "tokenizer/byte_unicode.hpp"
#include "tokenizer/utf8.hpp"

namespace moe::tok {

namespace {

// The pre-tokenizer's name as the file gives it (known, or
// pre_tokenizer_spec has thrown), for the splitter's report.
SplitterOptions splitter_options(const Vocab &vocab, const Log &log) {
    SplitterOptions o;
    o.log = log;
    o.role = "pre-tokenizer '" + (vocab.pre().empty() ? std::string("default") : vocab.pre()) + "'";
    return o;
}

}  // namespace

BpeTokenizer::BpeTokenizer(const Vocab &vocab, const Log &log)
    : vocab_(vocab), spec_(pre_tokenizer_spec(vocab.pre())), splitter_(spec_.patterns, splitter_options(vocab, log)) {}

void BpeTokenizer::tokenize(std::string_view text, Piece range, std::vector<int32_t> &out, BpeScratch &s) const {
    s.pieces.clear();
    splitter_.split(text, range, s.pieces, s.split);
    for (const Piece &p : s.pieces) {
        s.mapped.clear();
        for (size_t i = p.begin; i < p.end; ++i) s.mapped += byte_to_unicode(static_cast<uint8_t>(text[i]));
        tokenize_piece(out, s);
    }
}

void BpeTokenizer::tokenize_piece(std::vector<int32_t> &out, BpeScratch &s) const {
    const std::string_view mapped = s.mapped;
    if (mapped.empty()) return;
    const bool by_token_id = vocab_.merges_by_token_id();
    if (spec_.ignore_merges) {
        const int32_t whole = vocab_.find(mapped);
        if (whole >= 0 && (!by_token_id || vocab_.mergeable(whole))) {
            out.push_back(whole);
            return;
        }
    }
    const auto id_of = [&](std::string_view character) { return vocab_.symbol_id(character); };
    if (by_token_id) {
        // Merged symbols are contiguous, so a pair's joined text is a slice of the piece.
        merge_symbols(mapped, s.merge, id_of,
                      [&](const MergeSymbol &l, const MergeSymbol &r, double &cost, int32_t &result) {
                          const int32_t joined = vocab_.find(mapped.substr(l.begin, l.len + r.len));
                          if (joined < 0 || !vocab_.mergeable(joined)) return false;
                          cost = joined;
                          result = joined;
                          return true;
                      });
    } else {
        merge_symbols(mapped, s.merge, id_of,
                      [&](const MergeSymbol &l, const MergeSymbol &r, double &cost, int32_t &result) {
                          if (l.id < 0 || r.id < 0) return false;
                          const MergeRule *rule = vocab_.merge(l.id, r.id);
                          if (!rule) return false;
                          cost = rule->rank;
                          result = rule->result;
                          return true;
                      });
    }

    const int32_t n_tokens = vocab_.n_tokens();
    for (int32_t i = 0; i >= 0; i = s.merge.symbols[size_t(i)].next) {
        const MergeSymbol &sym = s.merge.symbols[size_t(i)];
        if (sym.id >= 0 && sym.id < n_tokens) {
            out.push_back(sym.id);
            continue;
        }
        // Not a token (a merge result or a character the vocabulary lacks):
        // emit it character by character rather than lose any of it.
        for (uint32_t k = 0; k < sym.len;) {
            const size_t len = std::min<size_t>(utf8_char_len(static_cast<uint8_t>(mapped[sym.begin + k])), sym.len - k);
            emit_character(mapped.substr(sym.begin + k, len), out);
            k += uint32_t(len);
        }
    }
}

void BpeTokenizer::emit_character(std::string_view character, std::vector<int32_t> &out) const {
    const int32_t id = vocab_.find(character);
    if (id >= 0) {
        out.push_back(id);
        return;
    }
    // No token of its own: the tokens of its single bytes if all exist, else
    // the unknown token.
    const size_t start = out.size();
    for (const char &c : character) {
        const int32_t byte_id = vocab_.find(std::string_view(&c, 1));
        if (byte_id < 0) {
            out.resize(start);
            break;
        }
        out.push_back(byte_id);
    }
    if (out.size() > start) return;
    if (vocab_.unk() >= 0) {
        out.push_back(vocab_.unk());
        return;
    }
    size_t pos = 0;
    const int b = unicode_to_byte(decode_utf8(character, pos));  // the text's byte this character stands for
    fail(Status::bad_format,
         "the vocabulary has no token for byte 0x%02X of the text: none for its byte-level character '%.*s' or that "
         "character's single bytes, and no unknown token",
         unsigned(b < 0 ? 0 : b), int(character.size()), character.data());
}

}  // namespace moe::tok
