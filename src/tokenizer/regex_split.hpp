// Pre-tokenization by regular expressions (PCRE2, UTF-8 with Unicode
// properties, JIT-compiled where available). The expressions are applied in
// sequence: each one re-splits every piece produced so far, and both its
// matches and the unmatched gaps between them become pieces. Lookarounds and
// anchors see only the piece being split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.hpp"

// PCRE2's compiled expression (pcre2_code with 8-bit code units).
struct pcre2_real_code_8;

namespace moe::tok {

// The Unicode Script property Han in PCRE2's syntax. From PCRE2 10.40 on a
// bare \p{Han} means Script_Extensions, which adds characters Han shares with
// other scripts (U+3001 and U+3002, the ideographic comma and full stop,
// among them); expressions written for other engines mean the Script alone.
const char *script_han();

// A byte range of the text being split.
struct Piece {
    size_t begin = 0;
    size_t end = 0;
};

// Buffers reused across calls.
struct SplitScratch {
    std::vector<Piece> current, next;
};

// Whether PCRE2 compiles expressions to machine code here: false when the
// library was built without its JIT compiler (or, where PCRE2 can tell,
// when this system refuses it executable memory). The interpreter then
// matches every expression, and there is nothing to report.
bool jit_available();

// Compiles an expression to machine code, as pcre2_jit_compile does and
// with its results (0, or a negative PCRE2 error code).
using JitCompile = int (*)(pcre2_real_code_8 *code, uint32_t options);

struct SplitterOptions {
    // Where a failed JIT compilation is reported (once per expression, when
    // the splitter is built): the expression still splits, through the
    // interpreter, into the same pieces, only more slowly.
    Log log;
    // What the expressions are, for that report: "pre-tokenizer 'qwen2'".
    std::string role = "pre-tokenizer";
    // null: PCRE2's own; tests pass one that fails.
    JitCompile jit_compile = nullptr;
};

class RegexSplitter {
public:
    // Throws internal when an expression does not compile (they are built in).
    explicit RegexSplitter(const std::vector<std::string> &patterns, const SplitterOptions &options = {});
    ~RegexSplitter();
    RegexSplitter(const RegexSplitter &) = delete;
    RegexSplitter &operator=(const RegexSplitter &) = delete;

    // Splits text[range] into pieces, appended to out. The text must be valid
    // UTF-8 and the range must start and end on character boundaries.
    void split(std::string_view text, Piece range, std::vector<Piece> &out, SplitScratch &scratch) const;

private:
    struct Compiled;
    void split_one(const Compiled &re, std::string_view text, Piece range, std::vector<Piece> &out) const;
    std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace moe::tok
