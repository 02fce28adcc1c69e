// Tokenizer behaviour on generated vocabularies: byte-level BPE round trips,
// merge order, special tokens, BOS/EOS, SPM byte fallback, and clear errors
// for hostile metadata and invalid text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "model/generator.hpp"
#include "support/gguf_builder.hpp"
#include "support/paths.hpp"
#include "support/vocab_tokens.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/regex_split.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using moe::Status;
using moe::test::byte_level;
using moe::test::GgufBuilder;
using moe::test::VocabTokens;
using moe::tok::Tokenizer;

// 256 byte tokens, a few merges, control tokens <|im_start|> / <|im_end|>.
GgufBuilder bpe_vocab(const std::string &pre = "qwen2") {
    VocabTokens v = moe::test::byte_level_tokens();
    const std::vector<std::string> merges = {byte_level(" ") + " t", "h e", byte_level(" t") + " he", "l l", "o w"};
    for (const char *t : {" t", "he", " the", "ll", "ow"}) v.add(byte_level(t), moe::test::kNormal);
    v.add("<|im_start|>", moe::test::kControl);
    v.add("<|im_end|>", moe::test::kControl);
    v.add("<user>", moe::test::kUserDefined);
    GgufBuilder b;
    b.kv_string("general.architecture", "qwen3moe")
        .kv_string("tokenizer.ggml.model", "gpt2")
        .kv_string("tokenizer.ggml.pre", pre)
        .kv_array_string("tokenizer.ggml.tokens", v.tokens)
        .kv_array_i32("tokenizer.ggml.token_type", v.types)
        .kv_array_string("tokenizer.ggml.merges", merges)
        .kv_u32("tokenizer.ggml.bos_token_id", 261)
        .kv_u32("tokenizer.ggml.eos_token_id", 262)
        .kv_bool("tokenizer.ggml.add_bos_token", true);
    return b;
}

std::unique_ptr<Tokenizer> load(const GgufBuilder &b) {
    const auto bytes = b.build();
    const auto file = moe::gguf::GgufFile::parse_memory(bytes.data(), bytes.size(), "test.gguf");
    return Tokenizer::from_gguf(*file);
}

Status load_status(const GgufBuilder &b, std::string *message = nullptr) {
    try {
        (void)load(b);
    } catch (const moe::Error &e) {
        if (message) *message = e.what();
        return e.status();
    }
    return Status::ok;
}

std::vector<int32_t> tokenize(const Tokenizer &t, const std::string &s, bool add_special = false,
                              bool parse_special = false) {
    std::vector<int32_t> ids;
    t.tokenize(s, add_special, parse_special, ids);
    return ids;
}

const std::vector<std::string> kRoundTripTexts = {
    "",
    "the",
    "Hello world",
    " leading and trailing spaces  ",
    "tabs\tand\nnew\r\nlines\n\n\n",
    "numbers 1234567 3.14159 -42",
    "punctuation!?... (brackets) [x] {y} <z> 'quoted' \"double\" it's we'll",
    "ünïcödé 日本語のテキスト 한국어 текст عربى",
    "emoji 🦙🚀 and combining e\xCC\x81",
    "<|im_start|>user\nhi<|im_end|>",
    "    indented code();\n\tx = y + 1;",
};

TEST(Tokenizer, BpeMergesInRankOrder) {
    const auto t = load(bpe_vocab());
    // " the": " t" (rank 0) first, then "he" (rank 1), then " t"+"he" (rank 2).
    EXPECT_EQ(tokenize(*t, " the"), (std::vector<int32_t>{258}));
    EXPECT_EQ(tokenize(*t, "the"), (std::vector<int32_t>{t->vocab().find("t"), 257}));
    EXPECT_EQ(tokenize(*t, "hello"), (std::vector<int32_t>{257, 259, t->vocab().find("o")}));
}

TEST(Tokenizer, BpeRoundTripsOnSyntheticVocab) {
    for (const char *pre : {"qwen2", "gpt-2", "llama-bpe", "default", "deepseek-llm", "deepseek-coder", "deepseek-v3",
                            "gpt-4o", "kimi-k2"}) {
        SCOPED_TRACE(pre);
        const auto t = load(bpe_vocab(pre));
        for (const std::string &s : kRoundTripTexts) {
            const auto ids = tokenize(*t, s, false, true);
            EXPECT_EQ(t->detokenize(ids), s);
            EXPECT_EQ(t->detokenize(tokenize(*t, s)), s);
        }
    }
}

TEST(Tokenizer, BpeRoundTripsOnGeneratedModel) {
    moe::GeneratorConfig c;
    c.preset = "tiny";
    c.quant = "q8_0";
    c.n_vocab = 1024;
    const std::string path = moe::test::scratch_dir() + "/tiny.gguf";
    moe::generate_model(c, path);
    const auto t = Tokenizer::open_vocab_only(path);
    EXPECT_EQ(t->n_tokens(), 1024);
    EXPECT_EQ(t->vocab().pre(), "qwen2");
    for (const std::string &s : kRoundTripTexts) EXPECT_EQ(t->detokenize(tokenize(*t, s, true, true)), s);
    // Lower-case words merge into letter pairs: fewer tokens than bytes.
    EXPECT_LT(tokenize(*t, "the quick brown fox").size(), std::string("the quick brown fox").size());
}

TEST(Tokenizer, SpecialTokensNeedParseSpecialButUserDefinedDoNot) {
    const auto t = load(bpe_vocab());
    const int32_t start = t->vocab().find("<|im_start|>"), user = t->vocab().find("<user>");
    const auto parsed = tokenize(*t, "<|im_start|>x<user>", false, true);
    ASSERT_EQ(parsed.size(), 3u);
    EXPECT_EQ(parsed[0], start);
    EXPECT_EQ(parsed[2], user);
    const auto plain = tokenize(*t, "<|im_start|>x<user>", false, false);
    EXPECT_GT(plain.size(), 3u);
    EXPECT_EQ(plain.back(), user);
    for (int32_t id : plain) EXPECT_NE(id, start);
}

TEST(Tokenizer, AddSpecialAddsBosAsTheVocabularyAsks) {
    const auto t = load(bpe_vocab());
    EXPECT_EQ(t->bos(), 261);
    EXPECT_EQ(t->eos(), 262);
    const auto ids = tokenize(*t, "x", true, false);
    ASSERT_EQ(ids.size(), 2u);
    EXPECT_EQ(ids[0], 261);
    auto b = bpe_vocab();
    b.kv_bool("tokenizer.ggml.add_bos_token", false).kv_bool("tokenizer.ggml.add_eos_token", true);
    const auto t2 = load(b);
    EXPECT_EQ(tokenize(*t2, "x", true, false), (std::vector<int32_t>{t2->vocab().find("x"), 262}));
}

TEST(Tokenizer, SpmMergesByScoreWithSpacePrefixAndByteFallback) {
    VocabTokens v = moe::test::spm_byte_fallback_tokens();
    const std::string sp = "\xE2\x96\x81";
    moe::test::add_scored_pieces(v, {sp + "h", "h", "i", sp + "hi", sp, "hi"});
    GgufBuilder b;
    b.kv_string("tokenizer.ggml.model", "llama")
        .kv_array_string("tokenizer.ggml.tokens", v.tokens)
        .kv_array_i32("tokenizer.ggml.token_type", v.types)
        .kv_array_f32("tokenizer.ggml.scores", v.scores);
    const auto t = load(b);
    const int32_t sp_hi = t->vocab().find(sp + "hi");
    EXPECT_EQ(tokenize(*t, "hi"), (std::vector<int32_t>{sp_hi}));
    EXPECT_EQ(tokenize(*t, "hi", true), (std::vector<int32_t>{1, sp_hi}));
    // 'é' has no token: one <0xXX> token per byte.
    const auto ids = tokenize(*t, "hi\xC3\xA9");
    EXPECT_EQ(ids, (std::vector<int32_t>{sp_hi, 3 + 0xC3, 3 + 0xA9}));
    EXPECT_EQ(t->detokenize(ids), " hi\xC3\xA9");
}

TEST(Tokenizer, InvalidUtf8TextIsInvalidArgumentNamingTheOffset) {
    const auto t = load(bpe_vocab());
    for (const std::string &bad : {std::string("ab\xFF"), std::string("\xC3"), std::string("x\xED\xA0\x80"),
                                   std::string("\xC0\x80")}) {
        std::vector<int32_t> ids;
        try {
            t->tokenize(bad, false, false, ids);
            ADD_FAILURE() << "accepted invalid UTF-8";
        } catch (const moe::Error &e) {
            EXPECT_EQ(e.status(), Status::invalid_argument);
            EXPECT_NE(std::string(e.what()).find("offset"), std::string::npos) << e.what();
        }
    }
}

TEST(Tokenizer, PieceOfOutOfRangeTokenIsInvalidArgument) {
    const auto t = load(bpe_vocab());
    std::string out;
    for (int32_t id : {-1, t->n_tokens(), std::numeric_limits<int32_t>::max()}) {
        try {
            t->append_piece(id, out);
            ADD_FAILURE() << id;
        } catch (const moe::Error &e) {
            EXPECT_EQ(e.status(), Status::invalid_argument);
        }
    }
}

TEST(Tokenizer, HostileMetadataGivesClearErrors) {
    std::string msg;
    {
        auto b = bpe_vocab();
        b.kv_array_string("tokenizer.ggml.merges", {"h e", "nospace"});
        EXPECT_EQ(load_status(b, &msg), Status::bad_format);
        EXPECT_NE(msg.find("tokenizer.ggml.merges[1]"), std::string::npos) << msg;
    }
    {
        auto b = bpe_vocab();
        b.kv_array_i32("tokenizer.ggml.token_type", {1, 1});
        EXPECT_EQ(load_status(b, &msg), Status::bad_format);
        EXPECT_NE(msg.find("token_type"), std::string::npos) << msg;
    }
    {
        auto b = bpe_vocab();
        b.kv_u32("tokenizer.ggml.bos_token_id", 100000);
        EXPECT_EQ(load_status(b, &msg), Status::bad_format);
        EXPECT_NE(msg.find("bos_token_id"), std::string::npos) << msg;
    }
    {
        auto b = bpe_vocab();
        b.kv_string("tokenizer.ggml.pre", "no-such-pre");
        EXPECT_EQ(load_status(b, &msg), Status::unsupported);
        EXPECT_NE(msg.find("no-such-pre"), std::string::npos) << msg;
    }
    {
        auto b = bpe_vocab();
        b.kv_string("tokenizer.ggml.model", "bert");
        EXPECT_EQ(load_status(b, &msg), Status::unsupported);
    }
    {
        auto b = bpe_vocab();
        b.remove_kv("tokenizer.ggml.model");
        EXPECT_EQ(load_status(b, &msg), Status::unsupported);
        EXPECT_NE(msg.find("no tokenizer"), std::string::npos) << msg;
    }
    {
        auto b = bpe_vocab();
        b.kv_array_string("tokenizer.ggml.tokens", {});
        EXPECT_EQ(load_status(b, &msg), Status::bad_format);
    }
    {
        auto b = bpe_vocab();
        b.kv_array_i32("tokenizer.ggml.token_type", std::vector<int32_t>(264, 9));
        EXPECT_EQ(load_status(b, &msg), Status::bad_format);
    }
    {
        auto b = bpe_vocab();
        b.kv_array_f32("tokenizer.ggml.scores", std::vector<float>(264, std::nanf("")));
        EXPECT_EQ(load_status(b, &msg), Status::bad_format);
    }
    {
        auto b = bpe_vocab();
        b.kv_u32("tokenizer.ggml.tokens", 7);  // wrong type
        EXPECT_EQ(load_status(b, &msg), Status::bad_format);
    }
}

TEST(Tokenizer, MergesOfUnknownTextsAndDuplicateTokensDoNotBreakTokenizing) {
    auto b = bpe_vocab();
    b.kv_array_string("tokenizer.ggml.merges", {"q z", "qz y", "\xFF\xFE x", "h e", "h e"});
    const auto t = load(b);
    const auto ids = tokenize(*t, "qzy hex");
    EXPECT_EQ(t->detokenize(ids), "qzy hex");
}

// `current` splits every text as `reference` does: the texts given plus 4000
// random strings of up to max_parts of `parts` (seeded).
void expect_same_pieces(const moe::tok::RegexSplitter &current, const moe::tok::RegexSplitter &reference,
                        std::vector<std::string> texts, const std::vector<std::string> &parts, int max_parts,
                        uint32_t seed) {
    using moe::tok::Piece;
    std::mt19937 rng(seed);
    for (int i = 0; i < 4000; ++i) {
        std::string s;
        for (int n = int(rng() % uint32_t(max_parts)) + 1; n > 0; --n) s += parts[rng() % parts.size()];
        texts.push_back(s);
    }
    std::vector<Piece> got, want;
    moe::tok::SplitScratch scratch;
    auto as_text = [](const std::string &s, const std::vector<Piece> &pieces) {
        std::string out;
        for (const Piece &p : pieces) out += "[" + s.substr(p.begin, p.end - p.begin) + "]";
        return out;
    };
    for (const std::string &s : texts) {
        got.clear();
        want.clear();
        current.split(s, {0, s.size()}, got, scratch);
        reference.split(s, {0, s.size()}, want, scratch);
        EXPECT_EQ(as_text(s, got), as_text(s, want));
    }
}

// The gpt-4o expression as first written, with a lookahead in each repeated
// group: the reference for the splits of the single-class rewrite.
const char *const kGpt4oLookarounds =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
    R"(|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

TEST(Tokenizer, Gpt4oPreTokenizerSplitsAsTheLookaroundExpression) {
    const moe::tok::RegexSplitter current(moe::tok::pre_tokenizer_spec("gpt-4o").patterns);
    const moe::tok::RegexSplitter reference({kGpt4oLookarounds});
    // Letters of every case kind (lower, upper, accented, title case, modifier,
    // uncased), marks, digits, contractions, spaces, line breaks, symbols.
    const std::vector<std::string> parts = {
        "a", "z", "A", "Z", "\xC3\xA9", "\xC3\x89", "\xC7\x85", "\xCA\xB0", "\xE6\x97\xA5", "\xE0\xA4\xBE",
        "\xCC\x81", "1", "42", "\xD9\xA3", "'", "'s", "'S", "'ll", "'Re", "'d", " ", "  ", "\t", "\n", "\r\n",
        "\r", "/", "!", "...", "-", "\xC2\xA0", "\xF0\x9F\xA6\x99", "\xD0\x96", "\xD0\xB6", "\xCE\xA3"};
    expect_same_pieces(current, reference, kRoundTripTexts, parts, 24, 7);
}

// deepseek-llm's trailing white space starts its match only where a run of
// white space starts (so a long run followed by other text costs one try,
// not one per space): the pieces are those of the plain "\\s+$".
TEST(Tokenizer, DeepseekLlmTrailingSpaceSplitsAsThePlainExpression) {
    const auto patterns = moe::tok::pre_tokenizer_spec("deepseek-llm").patterns;
    ASSERT_EQ(std::count(patterns.begin(), patterns.end(), std::string("(?<!\\s)\\s+$")), 1);
    std::vector<std::string> plain = patterns;
    std::replace(plain.begin(), plain.end(), std::string("(?<!\\s)\\s+$"), std::string("\\s+$"));
    const moe::tok::RegexSplitter current(patterns), reference(plain);
    const std::vector<std::string> parts = {" ", "  ", "\t", "\n", "\r\n", "a", "Z", "1", "!", "\xC3\xA9",
                                            "\xE3\x80\x80", "\xC2\xA0", "\xE6\x97\xA5", "\xED\x95\x9C", "."};
    std::vector<std::string> texts = kRoundTripTexts;
    texts.push_back(std::string(5000, ' ') + "1");
    texts.push_back("x" + std::string(5000, ' '));
    expect_same_pieces(current, reference, texts, parts, 16, 11);
}

// Runs of one kind of letter far longer than any word: each must come back
// whole, with no error from the expression engine, with the pre-tokenizers
// that split words by case.
TEST(Tokenizer, LongLetterRunsSplitWithTheCasedPreTokenizers) {
    const size_t n = 300000;
    std::string mixed;
    for (size_t i = 0; i < n / 2; ++i) mixed += i % 2 ? "b" : "A";
    std::string accented, cjk, hangul;
    for (size_t i = 0; i < n; ++i) accented += "\xC3\xA9";  // é: neither a-z nor A-Z
    for (size_t i = 0; i < n; ++i) cjk += "\xE6\x97\xA5";       // 日: a letter without case (Han)
    for (size_t i = 0; i < n; ++i) hangul += "\xED\x95\x9C";    // 한: a letter without case (not Han)
    for (const char *pre : {"gpt-4o", "kimi-k2"}) {
        const auto t = load(bpe_vocab(pre));
        for (const std::string &s : {std::string(n, 'a'), std::string(n, 'A'),
                                     "Hello" + std::string(n, 'x') + "'s", mixed, accented, cjk, hangul}) {
            SCOPED_TRACE(std::string(pre) + " " + s.substr(0, 8));
            std::vector<int32_t> ids;
            try {
                t->tokenize(s, false, false, ids);
            } catch (const moe::Error &e) {
                ADD_FAILURE() << e.what();
                continue;
            }
            EXPECT_EQ(t->detokenize(ids), s);
        }
    }
}

// One piece longer than ten megabytes still splits: a run of spaces, which
// the whitespace alternatives backtrack over, takes more steps than PCRE2's
// default limit, so the limit grows with the text. (Tokenizing the same
// text would hold hundreds of megabytes of merge symbols, hence the splitter
// alone.)
TEST(Tokenizer, PiecesBeyondTenMegabytesSplit) {
    using moe::tok::Piece;
    const size_t n = 11u << 20;
    const std::string spaces(n, ' '), spaces_x = spaces + "x";
    auto split = [](const char *pre, const std::string &s) {
        const moe::tok::RegexSplitter splitter(moe::tok::pre_tokenizer_spec(pre).patterns);
        std::vector<Piece> pieces;
        moe::tok::SplitScratch scratch;
        try {
            splitter.split(s, {0, s.size()}, pieces, scratch);
        } catch (const moe::Error &e) {
            ADD_FAILURE() << e.what();
        }
        std::vector<std::pair<size_t, size_t>> out;
        for (const Piece &p : pieces) out.emplace_back(p.begin, p.end);
        return out;
    };
    for (const char *pre : {"qwen2", "gpt-4o", "kimi-k2"}) {
        SCOPED_TRACE(pre);
        EXPECT_EQ(split(pre, spaces), (std::vector<std::pair<size_t, size_t>>{{0, n}}));
        // The last space goes with the word.
        EXPECT_EQ(split(pre, spaces_x), (std::vector<std::pair<size_t, size_t>>{{0, n - 1}, {n - 1, n + 1}}));
    }
}

// A byte-level vocabulary (token i is byte i) with some tokens renamed out of
// the way and extra tokens appended, and the given merges.
GgufBuilder odd_bpe_vocab(const std::vector<std::string> &merges, const std::vector<int> &renamed = {},
                          const std::vector<std::string> &extra = {}) {
    VocabTokens v = moe::test::byte_level_tokens();
    for (int b : renamed) v.tokens[size_t(b)] = "<renamed-" + std::to_string(b) + ">";
    for (const std::string &t : extra) v.add(t, moe::test::kNormal);
    GgufBuilder b;
    b.kv_string("tokenizer.ggml.model", "gpt2")
        .kv_string("tokenizer.ggml.pre", "gpt-2")
        .kv_array_string("tokenizer.ggml.tokens", v.tokens)
        .kv_array_i32("tokenizer.ggml.token_type", v.types)
        .kv_array_string("tokenizer.ggml.merges", merges);
    return b;
}

std::vector<int32_t> byte_ids(const std::string &s) {
    std::vector<int32_t> ids;
    for (char c : s) ids.push_back(static_cast<uint8_t>(c));
    return ids;
}

TEST(Tokenizer, MergesIntoTextsThatAreNotTokensKeepEveryCharacter) {
    // None of the merged texts is a token: each symbol falls back to the
    // tokens of its characters, two-byte stand-ins (Ã, ©, Ġ) included.
    const std::vector<std::string> merges = {"\xC3\x83 \xC2\xA9", byte_level(" ") + " " + byte_level(" "), "c a"};
    const auto t = load(odd_bpe_vocab(merges));
    for (const std::string &s : {std::string("caf\xC3\xA9"), std::string("a   "), std::string("ca \xC3\xA9t\xC3\xA9")}) {
        SCOPED_TRACE(s);
        const auto ids = tokenize(*t, s);
        EXPECT_EQ(ids, byte_ids(s));
        EXPECT_EQ(t->detokenize(ids), s);
    }
    // A character without a token of its own (Ã, the stand-in for byte 0xC3)
    // falls back to tokens of its single bytes when the vocabulary has them.
    const auto t2 = load(odd_bpe_vocab(merges, {0xC3}, {"\xC3", "\x83"}));
    EXPECT_EQ(tokenize(*t2, "caf\xC3\xA9"), (std::vector<int32_t>{'c', 'a', 'f', 256, 257, 0xA9}));
}

TEST(Tokenizer, CharactersWithoutAnyTokenAreTheUnknownTokenOrAnError) {
    // Neither Ã nor its bytes are tokens.
    auto b = odd_bpe_vocab({"\xC3\x83 \xC2\xA9"}, {0xC3});
    std::vector<int32_t> ids;
    try {
        load(b)->tokenize("caf\xC3\xA9", false, false, ids);
        ADD_FAILURE() << "dropped a character";
    } catch (const moe::Error &e) {
        EXPECT_EQ(e.status(), Status::bad_format);
        EXPECT_NE(std::string(e.what()).find("0xC3"), std::string::npos) << e.what();
    }
    b = odd_bpe_vocab({"\xC3\x83 \xC2\xA9"}, {0xC3}, {"<unk>"});
    b.kv_u32("tokenizer.ggml.unknown_token_id", 256);
    EXPECT_EQ(tokenize(*load(b), "caf\xC3\xA9"), (std::vector<int32_t>{'c', 'a', 'f', 256, 0xA9}));
}

}  // namespace
