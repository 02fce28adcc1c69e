#include "tokenizer/pre_tokenizer.hpp"

#include <initializer_list>

#include "common/error.hpp"
#include "tokenizer/regex_split.hpp"

namespace moe::tok {
namespace {

const char *const kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

#define MOE_CONTRACTIONS R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))"
const char *const kLlama3 = MOE_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char *const kQwen2 = MOE_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Upper-then-lower letter runs. "Upper" is any letter but a-z and "lower" any
// letter but A-Z, so letters without ASCII case count as both. Each is a
// single class: a lookahead inside a repeated group costs JIT stack per
// character and overflows it on long runs of letters.
#define MOE_UPPER R"([^\P{L}a-z])"
#define MOE_LOWER R"([^\P{L}A-Z])"
const char *const kGpt4o =
    R"([^\r\n\p{L}\p{N}]?)" MOE_UPPER "*" MOE_LOWER "+" MOE_CONTRACTIONS
    R"(?|[^\r\n\p{L}\p{N}]?)" MOE_UPPER "+" MOE_LOWER "*" MOE_CONTRACTIONS
    R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
#undef MOE_UPPER
#undef MOE_LOWER
#undef MOE_CONTRACTIONS

// Letters with case (the cased-letter ranges of the DeepSeek LLM pre-tokenizer).
const char *const kDeepseekLatin =
    "\\s?[\\x{41}-\\x{5A}\\x{61}-\\x{7A}\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}-\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}"
    "\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}"
    "\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}"
    "\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
    "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"
    "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
    "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}"
    "\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}-\\x{2184}"
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}-\\x{2CF3}\\x{A640}-\\x{A66D}"
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}"
    "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
    "\\x{1E900}-\\x{1E943}]+";
// CJK ideographs, U+0800 up to them, and Hangul syllables.
const char *const kCjkHangul = "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

// Kimi K2's tiktoken expression: Han runs first, then words of upper- then
// lower-case letters (CamelCase splits) whose letters are never Han. PCRE2
// has no class intersection, so "Lu Lt Lm Lo M, not Han" is written as the
// complement of the other general categories and Han (general categories
// partition the code points): one class, where a lookahead per character
// would cost JIT stack on long runs of letters.
std::string kimi_k2_expression() {
    const std::string han = script_han();
    const std::string upper = "[^\\p{Ll}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}" + han + "]";         // Lu Lt Lm Lo M
    const std::string lower = "[^\\p{Lu}\\p{Lt}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}" + han + "]";  // Ll Lm Lo M
    const std::string lead = R"([^\r\n\p{L}\p{N}]?)", contraction = "(?i:'s|'t|'re|'ve|'m|'ll|'d)?";
    return "[" + han + "]+|" + lead + upper + "*" + lower + "+" + contraction + "|" + lead + upper + "+" + lower + "*" +
           contraction + R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}

bool one_of(const std::string &name, std::initializer_list<const char *> names) {
    for (const char *n : names)
        if (name == n) return true;
    return false;
}

}  // namespace

PreTokenizerSpec pre_tokenizer_spec(const std::string &name) {
    PreTokenizerSpec s;
    if (name.empty() || name == "default") {
        s.patterns = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
    } else if (one_of(name, {"gpt-2", "gpt2", "olmo", "mpt", "phi-2"})) {
        s.patterns = {kGpt2};
    } else if (one_of(name, {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"})) {
        s.patterns = {kLlama3};
        s.ignore_merges = true;
    } else if (one_of(name, {"dbrx", "smaug-bpe"})) {
        s.patterns = {kLlama3};
    } else if (one_of(name, {"qwen2", "deepseek-r1-qwen", "megrez"})) {
        s.patterns = {kQwen2};
    } else if (name == "deepseek-llm") {
        // Trailing white space: "\\s+$" as such retries its run from every
        // space of a long run that is not at the end (quadratic in the
        // interpreter PCRE2 falls back to without JIT); starting only where a
        // run starts gives the same pieces, since a piece is searched from its
        // start and again only after a match, which ends it.
        s.patterns = {"[\r\n]", kDeepseekLatin, "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+", "(?<!\\s)\\s+$", kCjkHangul, "\\p{N}+"};
    } else if (name == "deepseek-coder") {
        s.patterns = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjkHangul, "\\p{N}"};
    } else if (name == "deepseek-v3") {
        s.patterns = {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
                      R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
    } else if (one_of(name, {"gpt-4o", "llama4"})) {
        s.patterns = {kGpt4o};
    } else if (name == "kimi-k2") {
        s.patterns = {kimi_k2_expression()};
        s.ignore_merges = true;  // tiktoken emits a piece that is itself a token whole
    } else {
        fail(Status::unsupported, "pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported", name.c_str());
    }
    return s;
}

}  // namespace moe::tok
