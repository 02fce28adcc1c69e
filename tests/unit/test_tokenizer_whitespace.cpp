// Whitespace in the pre-tokenizer expressions is the Unicode White_Space
// property, as the reference tokenizer has it: every code point is checked
// against a table of the property, and every pre-tokenizer against a
// character that is not whitespace under it but is under other definitions
// (U+180E MONGOLIAN VOWEL SEPARATOR, a space separator before Unicode 6.3).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/regex_split.hpp"
#include "tokenizer/utf8.hpp"

namespace {

using moe::tok::Piece;
using moe::tok::RegexSplitter;
using moe::tok::SplitScratch;

// White_Space from the Unicode Character Database (PropList.txt, unchanged
// since Unicode 6.3).
const std::vector<std::pair<uint32_t, uint32_t>> kWhiteSpaceRanges = {
    {0x0009, 0x000D}, {0x0020, 0x0020}, {0x0085, 0x0085}, {0x00A0, 0x00A0}, {0x1680, 0x1680},
    {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};

bool in_table(uint32_t cp) {
    for (const auto &[first, last] : kWhiteSpaceRanges)
        if (cp >= first && cp <= last) return true;
    return false;
}

bool surrogate(uint32_t cp) { return cp >= 0xD800 && cp <= 0xDFFF; }

std::string twice(uint32_t cp) {
    std::string s;
    moe::tok::append_utf8(s, cp);
    moe::tok::append_utf8(s, cp);
    return s;
}

// Whether the expression matches the character: a subject of the character
// twice splits into two matches when it does, one unmatched gap when not.
class MatchesChar {
public:
    explicit MatchesChar(const std::string &pattern) : splitter_({pattern}) {}
    bool operator()(uint32_t cp) {
        const std::string s = twice(cp);
        pieces_.clear();
        splitter_.split(s, {0, s.size()}, pieces_, scratch_);
        return pieces_.size() == 2;
    }

private:
    RegexSplitter splitter_;
    std::vector<Piece> pieces_;
    SplitScratch scratch_;
};

}  // namespace

// The table is the property as general categories define it: the space
// separators (Zs), line and paragraph separators (Zl, Zp), and the controls
// TAB to CR and NEL. Checked on the expression engine's own category tables.
TEST(TokenizerWhitespace, TheTableIsTheSeparatorsAndTheSpaceControls) {
    MatchesChar by_category(R"([\p{Zs}\p{Zl}\p{Zp}\x{9}-\x{D}\x{85}])");
    for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
        if (surrogate(cp)) continue;
        ASSERT_EQ(by_category(cp), in_table(cp)) << std::hex << "U+" << cp;
    }
}

// \s, \S and the classes built with them, in every form the pre-tokenizers
// write them, match exactly White_Space (or its complement) over every code point.
TEST(TokenizerWhitespace, EveryFormOfTheWhitespaceClassIsWhiteSpace) {
    struct Form {
        const char *pattern;
        bool matches_white_space;  // false: matches the other characters
    };
    for (const Form &f : {Form{R"(\s)", true}, Form{R"(\S)", false}, Form{R"([\s])", true}, Form{R"([^\s])", false},
                          Form{R"(\s(?!\S))", true}, Form{R"([^\s\x{0}])", false}, Form{R"(\s?)", true},
                          Form{R"([[:space:]])", true}, Form{R"([^[:space:]\x{0}])", false}}) {
        SCOPED_TRACE(f.pattern);
        MatchesChar matches(f.pattern);
        for (uint32_t cp = 1; cp <= 0x10FFFF; ++cp) {
            if (surrogate(cp)) continue;
            ASSERT_EQ(matches(cp), in_table(cp) == f.matches_white_space) << std::hex << "U+" << cp;
        }
    }
}

// Escapes that only look like \s keep their meaning: an escaped backslash
// before s, \s beside a literal ] at the start of a class, and \s after a
// POSIX class in the same class.
TEST(TokenizerWhitespace, OtherEscapesAreLeftAlone) {
    auto pieces = [](const std::string &pattern, const std::string &s) {
        const RegexSplitter splitter({pattern});
        std::vector<Piece> out;
        SplitScratch scratch;
        splitter.split(s, {0, s.size()}, out, scratch);
        std::vector<std::string> texts;
        for (const Piece &p : out) texts.push_back(s.substr(p.begin, p.end - p.begin));
        return texts;
    };
    EXPECT_EQ(pieces(R"(\\s)", "a\\sb"), (std::vector<std::string>{"a", "\\s", "b"}));
    EXPECT_EQ(pieces(R"([]\s]+)", "a] \t]b"), (std::vector<std::string>{"a", "] \t]", "b"}));
    EXPECT_EQ(pieces(R"([^]\s]+)", "ab] c"), (std::vector<std::string>{"ab", "] ", "c"}));
    EXPECT_EQ(pieces(R"(\x{73}+)", "ass"), (std::vector<std::string>{"a", "ss"}));
    // A POSIX class's ] does not end the class around it.
    EXPECT_EQ(pieces(R"([[:alpha:]\s]+)", "ab c1d"), (std::vector<std::string>{"ab c", "1", "d"}));
    EXPECT_EQ(pieces(R"([[:digit:]]\s)", "1 2x"), (std::vector<std::string>{"1 ", "2x"}));
}

// Every pre-tokenizer splits text around U+180E as around U+200B ZERO WIDTH
// SPACE: both are format characters (Cf), neither is White_Space, and no
// expression names either (both UTF-8 sequences are three bytes long, so
// the pieces' offsets must be equal).
TEST(TokenizerWhitespace, EveryPreTokenizerTreatsU180EAsAFormatCharacter) {
    const std::string mvs = "\xE1\xA0\x8E", zwsp = "\xE2\x80\x8B";
    auto with = [](std::string text, const std::string &c) {
        for (size_t at = text.find('#'); at != std::string::npos; at = text.find('#', at + c.size()))
            text.replace(at, 1, c);
        return text;
    };
    const std::vector<std::string> probes = {"x##!", "#x", "x #y", "x#\n", "! #y", "###", "x# ", "1#2", "a#'s",
                                             "# ", "x\n#\ny", "#!", "x#", "  #  "};
    auto offsets = [](const RegexSplitter &splitter, const std::string &s) {
        std::vector<Piece> pieces;
        SplitScratch scratch;
        splitter.split(s, {0, s.size()}, pieces, scratch);
        std::vector<std::pair<size_t, size_t>> out;
        for (const Piece &p : pieces) out.emplace_back(p.begin, p.end);
        return out;
    };
    for (const char *pre : {"default", "gpt-2", "llama3", "dbrx", "qwen2", "deepseek-llm", "deepseek-coder",
                            "deepseek-v3", "gpt-4o", "kimi-k2"}) {
        const RegexSplitter splitter(moe::tok::pre_tokenizer_spec(pre).patterns);
        std::string differs;
        for (const std::string &probe : probes)
            if (offsets(splitter, with(probe, mvs)) != offsets(splitter, with(probe, zwsp))) differs += " '" + probe + "'";
        EXPECT_EQ(differs, "") << pre << " ('#' is the character)";
    }
}
