#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex_split.hpp"

#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "common/error.hpp"
#include "tokenizer/utf8.hpp"

namespace moe::tok {
namespace {

// PCRE2's default step limit, and the steps allowed per byte of subject above
// it: the whitespace alternatives backtrack over a whole run before matching
// it, so the steps a piece needs grow with its length.
constexpr uint64_t kMinMatchLimit = 10'000'000;
constexpr uint64_t kMatchStepsPerByte = 16;

uint32_t match_limit_for(size_t length) {
    const uint64_t steps = std::max<uint64_t>(kMinMatchLimit, kMatchStepsPerByte * uint64_t(length));
    return uint32_t(std::min<uint64_t>(steps, UINT32_MAX));
}

std::string pcre2_message(int code) {
    PCRE2_UCHAR buf[256];
    if (pcre2_get_error_message(code, buf, sizeof buf) < 0) return format("PCRE2 error %d", code);
    return reinterpret_cast<const char *>(buf);
}

// Per-thread match state: one match block and a JIT stack large enough for
// long runs of whitespace or letters, reused by every call on the thread.
class MatchState {
public:
    MatchState() {
        data_ = pcre2_match_data_create(1, nullptr);
        context_ = pcre2_match_context_create(nullptr);
        jit_stack_ = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
        if (!data_ || !context_) throw std::bad_alloc();
        if (jit_stack_) pcre2_jit_stack_assign(context_, nullptr, jit_stack_);
    }
    ~MatchState() {
        pcre2_match_data_free(data_);
        pcre2_match_context_free(context_);
        if (jit_stack_) pcre2_jit_stack_free(jit_stack_);
    }
    MatchState(const MatchState &) = delete;
    MatchState &operator=(const MatchState &) = delete;
    pcre2_match_data *data() const { return data_; }
    pcre2_match_context *context() const { return context_; }

private:
    pcre2_match_data *data_ = nullptr;
    pcre2_match_context *context_ = nullptr;
    pcre2_jit_stack *jit_stack_ = nullptr;
};

MatchState &match_state() {
    thread_local MatchState state;
    return state;
}

// Whitespace as the reference tokenizer has it: the Unicode White_Space
// property. PCRE2's \s with Unicode properties also matches U+180E MONGOLIAN
// VOWEL SEPARATOR (a format character since Unicode 6.3), so every \s and \S
// of an expression is written as this class before it is compiled.
constexpr std::string_view kWhiteSpace =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// The expression with \s as [kWhiteSpace] (its ranges alone inside a class)
// and \S as [^kWhiteSpace]; the POSIX class [:space:] inside a class also
// becomes those ranges (with UCP it would leave out U+0085 NEL), and other
// POSIX classes ([:alpha:]) are copied whole, so their ] does not end the
// class. Other escapes are copied whole, so an escaped backslash before an s
// stays literal; a ] first in a class is a literal ]. \S and [:^space:] inside
// a class and \Q quoting have no such spelling and are refused (the
// expressions are built in: a new one using them fails every test).
std::string with_white_space(std::string_view pattern) {
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        if (in_class && pattern.substr(i, 2) == "[:") {
            const size_t end = pattern.find(":]", i + 2);
            if (end != std::string_view::npos) {
                const std::string_view name = pattern.substr(i + 2, end - i - 2);
                if (name == "^space")
                    fail(Status::internal, "pre-tokenizer expression '%.*s' uses [:^space:], which cannot be limited to White_Space",
                         int(pattern.size()), pattern.data());
                if (name == "space") out += kWhiteSpace;
                else out += pattern.substr(i, end + 2 - i);
                i = end + 1;
                continue;
            }
        }
        if (c == '\\' && i + 1 < pattern.size()) {
            const char escaped = pattern[++i];
            if (escaped == 's') {
                out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
            } else if (escaped == 'S' && !in_class) {
                out += "[^" + std::string(kWhiteSpace) + "]";
            } else if (escaped == 'S' || escaped == 'Q') {
                fail(Status::internal, "pre-tokenizer expression '%.*s' uses \\%c, which cannot be limited to White_Space",
                     int(pattern.size()), pattern.data(), escaped);
            } else {
                out += c;
                out += escaped;
            }
            continue;
        }
        out += c;
        if (in_class) {
            in_class = c != ']';
        } else if (c == '[') {
            in_class = true;
            if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
            if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
        }
    }
    return out;
}

}  // namespace

bool jit_available() {
    uint32_t built_in = 0;
    if (pcre2_config(PCRE2_CONFIG_JIT, &built_in) < 0 || built_in != 1) return false;
#ifdef PCRE2_JIT_TEST_ALLOC
    // PCRE2 10.45 on: whether the JIT compiler can allocate executable memory
    // (a system that forbids it fails every compilation with no more memory).
    if (pcre2_jit_compile(nullptr, PCRE2_JIT_TEST_ALLOC) != 0) return false;
#endif
    return true;
}

const char *script_han() {
#if PCRE2_MAJOR > 10 || (PCRE2_MAJOR == 10 && PCRE2_MINOR >= 40)
    return "\\p{sc:Han}";
#else
    return "\\p{Han}";  // the Script before 10.40
#endif
}

struct RegexSplitter::Compiled {
    pcre2_code *code = nullptr;
    std::string pattern;
    ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::vector<std::string> &patterns, const SplitterOptions &options) {
    const bool jit = jit_available();
    const JitCompile jit_compile = options.jit_compile ? options.jit_compile : &pcre2_jit_compile;
    for (const std::string &p : patterns) {
        auto c = std::make_unique<Compiled>();
        c->pattern = p;
        const std::string compiled = with_white_space(p);
        int err = 0;
        PCRE2_SIZE err_offset = 0;
        c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                                PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_offset, nullptr);
        if (!c->code)
            // The offset is into the expression as compiled (whitespace written out).
            fail(Status::internal, "pre-tokenizer expression '%s' does not compile at offset %zu: %s",
                 compiled.c_str(), size_t(err_offset), pcre2_message(err).c_str());
        // Without a JIT compiler the interpreter serves every expression, as
        // intended; with one, an expression it cannot compile (out of memory,
        // too large for its stack) is matched more slowly, which is said.
        if (jit) {
            const int rc = jit_compile(c->code, PCRE2_JIT_COMPLETE);
            if (rc != 0)
                options.log.write(MOESTREAM_LOG_WARN,
                                  "%s expression %zu of %zu is not compiled to machine code (PCRE2 JIT: %s); the "
                                  "interpreter matches it instead, into the same pieces, more slowly",
                                  options.role.c_str(), compiled_.size() + 1, patterns.size(),
                                  pcre2_message(rc).c_str());
        }
        compiled_.push_back(std::move(c));
    }
}

RegexSplitter::~RegexSplitter() = default;

void RegexSplitter::split(std::string_view text, Piece range, std::vector<Piece> &out,
                          SplitScratch &scratch) const {
    if (compiled_.empty()) {
        if (range.end > range.begin) out.push_back(range);
        return;
    }
    // Ping-pong between two lists; the last pass writes straight into `out`.
    std::vector<Piece> &current = scratch.current, &next = scratch.next;
    current.clear();
    current.push_back(range);
    for (size_t r = 0; r < compiled_.size(); ++r) {
        const bool last = r + 1 == compiled_.size();
        std::vector<Piece> &dst = last ? out : next;
        if (!last) dst.clear();
        for (const Piece &p : current) split_one(*compiled_[r], text, p, dst);
        if (!last) current.swap(next);
    }
}

void RegexSplitter::split_one(const Compiled &re, std::string_view text, Piece range, std::vector<Piece> &out) const {
    MatchState &ms = match_state();
    // The subject is the piece alone, so lookarounds and $ stop at its edges.
    const auto *subject = reinterpret_cast<PCRE2_SPTR>(text.data() + range.begin);
    const size_t length = range.end - range.begin;
    size_t pos = 0, gap_start = 0;
    pcre2_set_match_limit(ms.context(), match_limit_for(length));
    while (pos < length) {
        const int rc = pcre2_match(re.code, subject, length, pos, PCRE2_NO_UTF_CHECK, ms.data(), ms.context());
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0)
            fail(Status::internal, "pre-tokenizer expression '%s' failed on a %zu-byte piece: %s", re.pattern.c_str(),
                 length, pcre2_message(rc).c_str());
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(ms.data());
        const size_t m_begin = ov[0], m_end = ov[1];
        if (m_end <= m_begin) {  // an empty match splits nothing: step over one character
            if (m_begin >= length) break;
            pos = m_begin + utf8_char_len(static_cast<uint8_t>(text[range.begin + m_begin]));
            continue;
        }
        if (m_begin > gap_start) out.push_back({range.begin + gap_start, range.begin + m_begin});
        out.push_back({range.begin + m_begin, range.begin + m_end});
        pos = gap_start = m_end;
    }
    if (length > gap_start) out.push_back({range.begin + gap_start, range.end});
}

}  // namespace moe::tok
