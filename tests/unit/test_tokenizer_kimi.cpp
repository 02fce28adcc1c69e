// The kimi-k2 pre-tokenizer (Kimi K2's tiktoken expression). No Kimi
// vocabulary file is at hand, so the splits are checked against expectations
// worked out from the expression and against a plain transliteration of it.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/regex_split.hpp"
#include "tokenizer/utf8.hpp"

namespace {

using moe::tok::Piece;
using moe::tok::RegexSplitter;

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

}  // namespace
