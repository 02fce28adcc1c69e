// A pre-tokenizer expression the JIT compiler cannot compile is reported
// through the caller's log, once, naming the expression, and still splits
// (through the interpreter) into the pieces the compiled one gives.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/log.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/regex_split.hpp"

namespace {

using moe::tok::Piece;
using moe::tok::RegexSplitter;
using moe::tok::SplitterOptions;

struct Messages {
    std::vector<std::pair<int, std::string>> seen;
    static void hook(int level, const char *message, void *user) {
        static_cast<Messages *>(user)->seen.emplace_back(level, message);
    }
    moe::Log log() { return moe::Log(&Messages::hook, this, MOESTREAM_LOG_DEBUG); }
};

// The calls the seam saw, and the failure it returns for every one.
int jit_calls = 0;
int fail_out_of_memory(pcre2_code *, uint32_t) {
    ++jit_calls;
    return PCRE2_ERROR_NOMEMORY;
}

std::vector<std::string> pieces(const RegexSplitter &splitter, const std::string &text) {
    std::vector<Piece> out;
    moe::tok::SplitScratch scratch;
    splitter.split(text, {0, text.size()}, out, scratch);
    std::vector<std::string> words;
    for (const Piece &p : out) words.push_back(text.substr(p.begin, p.end - p.begin));
    return words;
}

const std::vector<std::string> kTexts = {
    "Hello world, it's 12345 o'clock!\n\n  and\ttabs   ",
    "CamelCaseWords and UPPER lower 3.14159 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xED\x95\x9C\xEA\xB5\xAD",
    "   leading and trailing   ", "x", ""};

}  // namespace

TEST(RegexSplitJit, AFailedCompilationIsLoggedOncePerExpressionWithItsRole) {
    if (!moe::tok::jit_available()) GTEST_SKIP() << "this PCRE2 has no JIT compiler: nothing is compiled or reported";
    const std::vector<std::string> patterns = moe::tok::pre_tokenizer_spec("default").patterns;
    ASSERT_GT(patterns.size(), 1u);
    Messages messages;
    SplitterOptions options{.log = messages.log(), .role = "pre-tokenizer 'default'", .jit_compile = &fail_out_of_memory};
    jit_calls = 0;
    const RegexSplitter failing(patterns, options);
    EXPECT_EQ(jit_calls, int(patterns.size()));
    ASSERT_EQ(messages.seen.size(), patterns.size());
    for (size_t i = 0; i < patterns.size(); ++i) {
        const std::string &m = messages.seen[i].second;
        EXPECT_EQ(messages.seen[i].first, MOESTREAM_LOG_WARN);
        const std::string which = "pre-tokenizer 'default' expression " + std::to_string(i + 1) + " of " +
                                  std::to_string(patterns.size()) + " is not compiled to machine code";
        EXPECT_EQ(m.rfind(which, 0), 0u) << m;
        EXPECT_NE(m.find("no more memory"), std::string::npos) << m;  // PCRE2's words for the code
    }
    // Splitting reports nothing more, and gives the pieces of the compiled expressions.
    const RegexSplitter compiled(patterns);
    for (const std::string &text : kTexts) EXPECT_EQ(pieces(failing, text), pieces(compiled, text)) << text;
    EXPECT_EQ(messages.seen.size(), patterns.size());
}

TEST(RegexSplitJit, ACompiledExpressionIsNotReported) {
    Messages messages;
    const RegexSplitter splitter(moe::tok::pre_tokenizer_spec("llama3").patterns,
                                 SplitterOptions{.log = messages.log(), .role = "pre-tokenizer 'llama3'"});
    EXPECT_TRUE(messages.seen.empty()) << messages.seen.front().second;
}

TEST(RegexSplitJit, TheInterpreterSplitsAsTheCompiledExpressions) {
    // Every pre-tokenizer's expressions, left to the interpreter by a JIT
    // compilation that fails, split the texts as compiled ones do.
    if (!moe::tok::jit_available()) GTEST_SKIP() << "this PCRE2 has no JIT compiler: both splitters interpret";
    for (const char *pre : {"default", "gpt2", "llama3", "qwen2", "gpt-4o", "deepseek-llm", "kimi-k2"}) {
        SCOPED_TRACE(pre);
        const std::vector<std::string> patterns = moe::tok::pre_tokenizer_spec(pre).patterns;
        const RegexSplitter interpreted(patterns, SplitterOptions{.jit_compile = &fail_out_of_memory});
        const RegexSplitter compiled(patterns);
        for (const std::string &text : kTexts) EXPECT_EQ(pieces(interpreted, text), pieces(compiled, text)) << text;
    }
}
