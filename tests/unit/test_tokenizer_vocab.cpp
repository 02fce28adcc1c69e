// Tokenizer against reference vocabularies: every ggml-vocab-<name>.gguf
// (vocabulary-only GGUF files) that has .inp / .out test vectors beside it is
// loaded without a model and must reproduce each vector exactly. The
// directory is MOESTREAM_VOCAB_DIR or <shared>/vocab; absent, the test skips.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "support/paths.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

namespace fs = std::filesystem;

std::string vocab_dir() {
    if (const char *env = std::getenv("MOESTREAM_VOCAB_DIR"); env && *env) return env;
    const std::string shared = moe::test::shared_dir();
    return shared.empty() ? std::string() : shared + "/vocab";
}

std::string read_all(const fs::path &p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// .inp: test strings, each followed by "\n__ggml_vocab_test__\n".
std::vector<std::string> read_inputs(const fs::path &p) {
    const std::string all = read_all(p);
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> out;
    size_t pos = 0;
    for (;;) {
        const size_t hit = all.find(sep, pos);
        if (hit == std::string::npos) break;
        out.push_back(all.substr(pos, hit - pos));
        pos = hit + sep.size();
    }
    return out;
}

// .out: one line of space-separated ids per test string.
std::vector<std::vector<int32_t>> read_outputs(const fs::path &p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<std::vector<int32_t>> out;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::vector<int32_t> ids;
        long v = 0;
        while (ls >> v) ids.push_back(int32_t(v));
        out.push_back(std::move(ids));
    }
    return out;
}

std::string ids_text(const std::vector<int32_t> &ids) {
    std::string s;
    for (int32_t id : ids) s += " " + std::to_string(id);
    return s;
}

std::string escaped(const std::string &s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20) out += "\\x" + std::to_string(int(c));
        else out += char(c);
    }
    return out;
}

struct VocabCase {
    fs::path gguf, inp, out;
};

std::vector<VocabCase> vocab_cases() {
    std::vector<VocabCase> cases;
    const std::string dir = vocab_dir();
    if (dir.empty() || !fs::is_directory(dir)) return cases;
    for (const auto &e : fs::directory_iterator(dir)) {
        const fs::path p = e.path();
        const std::string name = p.filename().string();
        if (name.rfind("ggml-vocab-", 0) != 0 || p.extension() != ".gguf") continue;
        VocabCase c{p, fs::path(p.string() + ".inp"), fs::path(p.string() + ".out")};
        if (fs::exists(c.inp) && fs::exists(c.out)) cases.push_back(c);
    }
    std::sort(cases.begin(), cases.end(), [](const VocabCase &a, const VocabCase &b) { return a.gguf < b.gguf; });
    return cases;
}

TEST(TokenizerVocab, ReferenceVectorsMatchExactly) {
    const std::vector<VocabCase> cases = vocab_cases();
    if (cases.empty()) GTEST_SKIP() << "no ggml-vocab-*.gguf with .inp/.out under '" << vocab_dir() << "'";
    for (const VocabCase &c : cases) {
        SCOPED_TRACE(c.gguf.filename().string());
        const std::vector<std::string> inputs = read_inputs(c.inp);
        const std::vector<std::vector<int32_t>> expected = read_outputs(c.out);
        ASSERT_FALSE(inputs.empty());
        ASSERT_EQ(inputs.size(), expected.size()) << "test strings and expected lines disagree in number";
        std::unique_ptr<moe::tok::Tokenizer> tok;
        try {
            tok = moe::tok::Tokenizer::open_vocab_only(c.gguf.string());
        } catch (const moe::Error &e) {
            ADD_FAILURE() << "loading failed: " << e.what();
            continue;
        }
        size_t passed = 0;
        std::vector<int32_t> ids;
        for (size_t i = 0; i < inputs.size(); ++i) {
            tok->tokenize(inputs[i], /*add_special=*/false, /*parse_special=*/false, ids);
            if (ids == expected[i]) {
                ++passed;
                continue;
            }
            ADD_FAILURE() << "vector " << i << " '" << escaped(inputs[i]) << "'\n  expected" << ids_text(expected[i])
                          << "\n  got     " << ids_text(ids);
        }
        std::printf("%s: %zu/%zu vectors match\n", c.gguf.filename().string().c_str(), passed, inputs.size());
    }
}

}  // namespace
