// The kimi-k2 pre-tokenizer (Kimi K2's tiktoken expression) and merges by
// token id, tiktoken's rank order, for a kimi-k2 vocabulary without
// tokenizer.ggml.merges. No Kimi vocabulary file is at hand, so the splits
// are checked against expectations worked out from the expression, against a
// plain transliteration of it, and the merges against a plain merge loop.
#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "support/gguf_builder.hpp"
#include "support/vocab_tokens.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/regex_split.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace {

using moe::test::byte_level;
using moe::test::GgufBuilder;
using moe::test::VocabTokens;
using moe::tok::Piece;
using moe::tok::RegexSplitter;
using moe::tok::Tokenizer;

using Pieces = std::vector<std::string>;

Pieces split(const RegexSplitter &splitter, const std::string &s) {
    std::vector<Piece> pieces;
    moe::tok::SplitScratch scratch;
    splitter.split(s, {0, s.size()}, pieces, scratch);
    Pieces out;
    for (const Piece &p : pieces) out.push_back(s.substr(p.begin, p.end - p.begin));
    return out;
}

const RegexSplitter &kimi_splitter() {
    static const RegexSplitter splitter(moe::tok::pre_tokenizer_spec("kimi-k2").patterns);
    return splitter;
}

// Alternatives in order: (1) Han runs; (2) an optional lead character (not a
// letter, digit, CR or LF), "upper" letters (Lu Lt Lm Lo M) then at least one
// "lower" letter (Ll Lm Lo M), an optional contraction in either case;
// (3) the same with at least one upper and any number of lower; (4) 1-3
// digits; (5) an optional space, other characters, then line breaks;
// (6) spaces up to the last line break; (7) spaces but the last before a
// non-space; (8) spaces. Letters in (2) and (3) are never Han.
TEST(KimiK2PreTokenizer, SplitsEachAlternativeAsTheExpressionSays) {
    const std::vector<std::pair<std::string, Pieces>> cases = {
        // (1) One piece per Han run; letters of other scripts stop it and
        // are stopped by it.
        {"你好世界", {"你好世界"}},
        {"Kimi是AI助手", {"Kimi", "是", "AI", "助手"}},
        {"abc中文def", {"abc", "中文", "def"}},
        // 々 (U+3005, a modifier letter) is of the Han script; the kana after it are not.
        {"佐々木さん", {"佐々木", "さん"}},
        // The ideographic full stop U+3002 is Han only by script extension,
        // and the fullwidth comma not at all: both are punctuation (5).
        {"你好，世界。", {"你好", "，", "世界", "。"}},
        // Katakana with the prolonged sound mark (a modifier letter, upper
        // and lower at once), Hangul: letters without case, one run each.
        {"東京タワー", {"東京", "タワー"}},
        {"한국어 text", {"한국어", " text"}},
        // (2) and (3): a word ends where a lower letter meets an upper one,
        // so CamelCase splits and a run of capitals keeps the next word's first letter.
        {"HelloWorld", {"Hello", "World"}},
        {"getHTTPResponse", {"get", "HTTPResponse"}},
        {"XMLHttpRequest", {"XMLHttp", "Request"}},
        {"ALLCAPS", {"ALLCAPS"}},
        // Title case (ǅ) is upper; a combining mark is upper and lower.
        {"ǅungla", {"ǅungla"}},
        {"e\xCC\x81te\xCC\x81", {"e\xCC\x81te\xCC\x81"}},
        // Contractions in any case stay on their word, after lower (2) or
        // upper-only (3) letters; the lead character may be a space or a bracket.
        {"don't DON'T They'LL I'm We'Re", {"don't", " DON'T", " They'LL", " I'm", " We'Re"}},
        {"(x)", {"(x", ")"}},
        // No contraction alternative of its own: an apostrophe leads a word,
        // and one not followed by a contraction is no part of the word before.
        {"'sup", {"'sup"}},
        {"x'y", {"x", "'y"}},
        {"the 's", {"the", " '", "s"}},
        // A line break never leads a word.
        {"hello world\nagain", {"hello", " world", "\n", "again"}},
        // (4) Digits in threes from the left.
        {"1234567", {"123", "456", "7"}},
        {"x12345y", {"x", "123", "45", "y"}},
        // (5) Punctuation with its line breaks; a single space may lead it.
        {"Hi!!\n\nThere", {"Hi", "!!\n\n", "There"}},
        {"a ...\r\nb", {"a", " ...\r\n", "b"}},
        // (6)-(8) Spaces: up to a line break, else all but the one before a
        // word (which leads it), all at the end.
        {"a   \n  b", {"a", "   \n", " ", " b"}},
        {"a  b", {"a", " ", " b"}},
        {"end   ", {"end", "   "}},
        {"\t\tx", {"\t", "\tx"}},
        // One expression, tried at each position in order: Han characters
        // that are symbols or digits join a match that (5) or (4) started.
        {"!⺀", {"!⺀"}},
        {"1〇", {"1〇"}},
        {"〇1", {"〇", "1"}},
    };
    for (const auto &[text, want] : cases) EXPECT_EQ(split(kimi_splitter(), text), want) << text;
}

// The expression as tiktoken writes it, with each class intersection
// [X&&[^\p{Han}]] as a lookahead before X: the reference for the
// single-class form the pre-tokenizer uses.
std::string kimi_k2_with_lookaheads() {
    const std::string han = moe::tok::script_han();
    const std::string upper = "(?:(?!" + han + R"()[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]))";
    const std::string lower = "(?:(?!" + han + R"()[\p{Ll}\p{Lm}\p{Lo}\p{M}]))";
    const std::string contraction = "(?i:'s|'t|'re|'ve|'m|'ll|'d)?";
    return "[" + han + "]+" + R"(|[^\r\n\p{L}\p{N}]?)" + upper + "*" + lower + "+" + contraction +
           R"(|[^\r\n\p{L}\p{N}]?)" + upper + "+" + lower + "*" + contraction +
           R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}

TEST(KimiK2PreTokenizer, SplitsAsTheLookaheadExpressionOnEveryCodePoint) {
    const RegexSplitter reference({kimi_k2_with_lookaheads()});
    // Every scalar value in order (runs of one script or category), then
    // each between an upper and a lower letter and before a space.
    std::string in_order, in_words;
    for (uint32_t c = 0; c <= 0x10FFFF; ++c) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        std::string s;
        moe::tok::append_utf8(s, c);
        in_order += s;
        in_words += "A" + s + "a" + s + " ";
    }
    for (const std::string *text : {&in_order, &in_words}) {
        const Pieces got = split(kimi_splitter(), *text), want = split(reference, *text);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "piece " << i;
    }
}

TEST(KimiK2PreTokenizer, SplitsAsTheLookaheadExpressionOnMixedText) {
    const RegexSplitter reference({kimi_k2_with_lookaheads()});
    // Letters of each kind, Han letters, marks, digits and symbols, the
    // fullwidth and ideographic punctuation, contractions (with the long s,
    // which matches s without case), spaces and line breaks.
    const std::vector<std::string> parts = {
        "a", "z", "A", "Z", "é", "É", "ǅ", "ʰ", "日", "々", "〇", "⺀", "\xF0\x96\xBF\xB0", "ア", "ー", "한", "\xCC\x81",
        "\xE0\xA4\xBE", "1", "42", "٣", "'", "'s", "'S", "'LL", "'ſ", "'Re", " ", "  ", "\t", "\n", "\r\n", "/",
        "!", "...", "\xC2\xA0", "。", "，", "\xF0\x9F\xA6\x99", "Ж", "ж"};
    std::mt19937 rng(11);
    for (int i = 0; i < 4000; ++i) {
        std::string s;
        for (int n = int(rng() % 24) + 1; n > 0; --n) s += parts[rng() % parts.size()];
        EXPECT_EQ(split(kimi_splitter(), s), split(reference, s)) << s;
    }
}

// --- merges by token id ---------------------------------------------------

// A byte-level vocabulary (token i is byte i) followed by `extra` (raw bytes)
// in id order, without merges.
struct ExtraToken {
    std::string raw;
    int32_t type = moe::test::kNormal;
};

GgufBuilder kimi_vocab(const std::vector<ExtraToken> &extra, const std::string &pre = "kimi-k2") {
    VocabTokens v = moe::test::byte_level_tokens();
    for (const ExtraToken &t : extra) v.add(byte_level(t.raw), t.type);
    GgufBuilder b;
    b.kv_string("tokenizer.ggml.model", "gpt2")
        .kv_string("tokenizer.ggml.pre", pre)
        .kv_array_string("tokenizer.ggml.tokens", v.tokens)
        .kv_array_i32("tokenizer.ggml.token_type", v.types);
    return b;
}

std::unique_ptr<Tokenizer> load(const GgufBuilder &b) {
    const auto bytes = b.build();
    const auto file = moe::gguf::GgufFile::parse_memory(bytes.data(), bytes.size(), "test.gguf");
    return Tokenizer::from_gguf(*file);
}

std::vector<int32_t> tokenize(const Tokenizer &t, const std::string &s) {
    std::vector<int32_t> ids;
    t.tokenize(s, false, false, ids);
    return ids;
}

TEST(KimiK2Merges, WithoutMergesTheLowerTokenIdMergesFirst) {
    // "abc" is one piece; "ab" and "bc" compete for the "b".
    const auto bc_first = load(kimi_vocab({{"bc"}, {"ab"}}));
    EXPECT_TRUE(bc_first->vocab().merges_by_token_id());
    EXPECT_EQ(tokenize(*bc_first, "abc"), (std::vector<int32_t>{'a', 256}));
    const auto ab_first = load(kimi_vocab({{"ab"}, {"bc"}}));
    EXPECT_EQ(tokenize(*ab_first, "abc"), (std::vector<int32_t>{256, 'c'}));
    // Merges build on merges: "ab" + "cd", not "abc" + "d" (no such token).
    const auto chain = load(kimi_vocab({{"cd"}, {"ab"}, {"abcd"}, {"bc"}}));
    EXPECT_EQ(tokenize(*chain, "abcde"), (std::vector<int32_t>{258, 'e'}));
    // A piece that is a token is that token, though merging cannot reach it
    // here: "bc" merges, then neither "abc" nor "bcd" is a token.
    const auto whole = load(kimi_vocab({{"bc"}, {"abcd"}}));
    EXPECT_EQ(tokenize(*whole, "abcd"), (std::vector<int32_t>{257}));
    EXPECT_EQ(tokenize(*whole, "abcde"), (std::vector<int32_t>{'a', 256, 'd', 'e'}));
}

TEST(KimiK2Merges, SpecialAndUnusedTokensNeverMerge) {
    // "xy" is a control token and "yz" unused (type 5): with parse_special
    // off neither is matched, and merging must not produce them.
    const auto t = load(kimi_vocab({{"xy", moe::test::kControl}, {"yz", 5}, {"zw"}}));
    EXPECT_EQ(tokenize(*t, "xy"), (std::vector<int32_t>{'x', 'y'}));
    EXPECT_EQ(tokenize(*t, "yzw"), (std::vector<int32_t>{'y', 258}));
}

TEST(KimiK2Merges, AMergesArrayStillGovernsAndOtherVocabulariesDoNotMergeByTokenId) {
    auto with_merges = kimi_vocab({{"bc"}, {"ab"}});
    with_merges.kv_array_string("tokenizer.ggml.merges", {"a b"});
    const auto t = load(with_merges);
    EXPECT_FALSE(t->vocab().merges_by_token_id());
    EXPECT_EQ(tokenize(*t, "abc"), (std::vector<int32_t>{257, 'c'}));
    // A qwen2 vocabulary without merges merges nothing, as before.
    const auto qwen = load(kimi_vocab({{"bc"}, {"ab"}}, "qwen2"));
    EXPECT_FALSE(qwen->vocab().merges_by_token_id());
    EXPECT_EQ(tokenize(*qwen, "xabc"), (std::vector<int32_t>{'x', 'a', 'b', 'c'}));
}

// tiktoken's encoder written plainly, on raw bytes: a piece that is a token
// is that token; otherwise, starting from single bytes, merge the adjacent
// pair whose joined bytes are the token of the lowest id (the leftmost such
// pair on ties) until no pair joins into a token.
std::vector<int32_t> reference_encode(const std::map<std::string, int32_t> &ranks, const std::string &piece) {
    if (const auto it = ranks.find(piece); it != ranks.end()) return {it->second};
    std::vector<std::string> symbols;
    for (char c : piece) symbols.emplace_back(1, c);
    for (;;) {
        size_t best = symbols.size();
        int32_t best_rank = 0;
        for (size_t i = 0; i + 1 < symbols.size(); ++i) {
            const auto it = ranks.find(symbols[i] + symbols[i + 1]);
            if (it == ranks.end() || (best < symbols.size() && it->second >= best_rank)) continue;
            best = i;
            best_rank = it->second;
        }
        if (best == symbols.size()) break;
        symbols[best] += symbols[best + 1];
        symbols.erase(symbols.begin() + std::ptrdiff_t(best) + 1);
    }
    std::vector<int32_t> ids;
    for (const std::string &s : symbols) ids.push_back(s.size() == 1 ? int32_t(uint8_t(s[0])) : ranks.at(s));
    return ids;
}

TEST(KimiK2Merges, MatchAPlainMergeLoopOnRandomVocabularies) {
    // Few distinct characters, so tokens overlap and compete.
    const std::vector<std::string> alphabet = {"a", "b", "c", "A", "B", " ", "é", "1", "!"};
    std::mt19937 rng(5);
    auto random_text = [&](size_t n) {
        std::string s;
        for (size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
        return s;
    };
    for (int round = 0; round < 20; ++round) {
        SCOPED_TRACE(round);
        // Substrings of random texts, in random order, as tokens after the bytes.
        std::vector<ExtraToken> extra;
        std::map<std::string, int32_t> ranks;
        for (int b = 0; b < 256; ++b) ranks[std::string(1, char(b))] = b;
        while (extra.size() < 60) {
            const std::string text = random_text(8);
            const size_t begin = rng() % text.size(), len = 2 + rng() % 4;
            const std::string raw = text.substr(begin, len);
            if (raw.size() < 2 || ranks.count(raw)) continue;
            ranks[raw] = 256 + int32_t(extra.size());
            extra.push_back({raw});
        }
        const auto t = load(kimi_vocab(extra));
        for (int i = 0; i < 200; ++i) {
            const std::string text = random_text(1 + rng() % 20);
            std::vector<int32_t> want;
            for (const std::string &piece : split(kimi_splitter(), text)) {
                const std::vector<int32_t> ids = reference_encode(ranks, piece);
                want.insert(want.end(), ids.begin(), ids.end());
            }
            EXPECT_EQ(tokenize(*t, text), want) << text;
        }
    }
}

}  // namespace
