#include "tokenizer/vocab.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "tokenizer/utf8.hpp"

namespace moe::tok {
namespace {

constexpr const char *kModelKey = "tokenizer.ggml.model";
constexpr const char *kPreKey = "tokenizer.ggml.pre";
constexpr const char *kTokensKey = "tokenizer.ggml.tokens";
constexpr const char *kScoresKey = "tokenizer.ggml.scores";
constexpr const char *kTypesKey = "tokenizer.ggml.token_type";
constexpr const char *kMergesKey = "tokenizer.ggml.merges";

uint64_t pair_key(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }

// Pre-tokenizer names whose vocabularies expect a BOS by default.
bool adds_bos_by_default(const std::string &pre) {
    return pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" || pre == "pixtral";
}

// Pre-tokenizer names of vocabularies converted from tiktoken, whose token
// order is the merge order when the file has no merges.
bool merges_by_token_id_without_merges(const std::string &pre) { return pre == "kimi-k2"; }

std::string printable(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 40)) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u < 0x7F) out += c;
        else out += format("\\x%02X", u);
    }
    if (s.size() > 40) out += "...";
    return out;
}

}  // namespace

bool Vocab::present_in(const gguf::GgufFile &file) {
    const std::string model = file.get_string(kModelKey);
    return !model.empty() && model != "none";
}

std::unique_ptr<const Vocab> Vocab::from_gguf(const gguf::GgufFile &file) {
    const std::string model = file.get_string(kModelKey);
    if (model.empty() || model == "none")
        fail(Status::unsupported, "%s: the model has no tokenizer (%s is absent); pass token ids instead",
             file.path().c_str(), kModelKey);
    std::unique_ptr<Vocab> v(new Vocab());
    if (model == "gpt2") v->kind_ = VocabKind::bpe;
    else if (model == "llama") v->kind_ = VocabKind::spm;
    else
        fail(Status::unsupported, "%s: tokenizer model '%s' is not supported (gpt2, llama); pass token ids instead",
             file.path().c_str(), printable(model).c_str());
    v->pre_ = file.get_string(kPreKey, "default");
    v->load_tokens(file);
    if (v->kind_ == VocabKind::bpe) v->load_merges(file);
    v->load_special_ids(file);
    return v;
}

void Vocab::load_tokens(const gguf::GgufFile &file) {
    const gguf::StringArray texts = file.get_string_array(kTokensKey);  // read in place, twice
    if (texts.empty()) fail(Status::bad_format, "%s: %s is absent or empty", file.path().c_str(), kTokensKey);
    if (texts.size() >= uint64_t(std::numeric_limits<int32_t>::max() / 2))
        fail(Status::bad_format, "%s: %s has %llu entries, too many", file.path().c_str(), kTokensKey,
             static_cast<unsigned long long>(texts.size()));
    const size_t n = size_t(texts.size());

    size_t total = 0;
    for (std::string_view t : texts) total += t.size();
    arena_.reserve(total);
    offsets_.reserve(n + 1);
    offsets_.push_back(0);
    for (std::string_view t : texts) {
        arena_.insert(arena_.end(), t.begin(), t.end());
        offsets_.push_back(arena_.size());
    }

    if (file.has(kTypesKey)) {
        const std::vector<int32_t> raw = file.get_i32_array(kTypesKey);
        if (raw.size() != n)
            fail(Status::bad_format, "%s: %s has %zu entries but %s has %zu", file.path().c_str(), kTypesKey,
                 raw.size(), kTokensKey, n);
        types_.reserve(n);
        for (size_t i = 0; i < n; ++i) {
            if (raw[i] < 0 || raw[i] > int32_t(TokenType::byte))
                fail(Status::bad_format, "%s: %s[%zu] is %d, not a token type (0-6)", file.path().c_str(), kTypesKey, i,
                     raw[i]);
            types_.push_back(TokenType(raw[i]));
        }
    } else {
        types_.assign(n, TokenType::normal);
    }
    if (file.has(kScoresKey)) {
        scores_ = file.get_f32_array(kScoresKey);
        if (scores_.size() != n)
            fail(Status::bad_format, "%s: %s has %zu entries but %s has %zu", file.path().c_str(), kScoresKey,
                 scores_.size(), kTokensKey, n);
        for (size_t i = 0; i < n; ++i)
            if (std::isnan(scores_[i]))
                fail(Status::bad_format, "%s: %s[%zu] is NaN", file.path().c_str(), kScoresKey, i);
    }

    by_text_.reserve(n);
    for (size_t i = 0; i < n; ++i) by_text_.insert_or_assign(text(int32_t(i)), int32_t(i));  // last duplicate wins

    for (size_t i = 0; i < n; ++i) {
        const TokenType t = types_[i];
        if (t != TokenType::control && t != TokenType::user_defined && t != TokenType::unknown) continue;
        const std::string_view s = text(int32_t(i));
        // Empty texts match nowhere; texts that are not UTF-8 could split a character of valid input.
        if (s.empty() || !is_valid_utf8(s)) continue;
        special_.push_back(int32_t(i));
    }
    std::stable_sort(special_.begin(), special_.end(),
                     [&](int32_t a, int32_t b) { return text(a).size() > text(b).size(); });
}

int32_t Vocab::find(std::string_view s) const {
    const auto it = by_text_.find(s);
    return it == by_text_.end() ? -1 : it->second;
}

int32_t Vocab::symbol_id(std::string_view s) const {
    if (const auto it = by_text_.find(s); it != by_text_.end()) return it->second;
    if (const auto it = extra_by_text_.find(s); it != extra_by_text_.end()) return it->second;
    return -1;
}

int32_t Vocab::intern(std::string_view s) {
    const int32_t existing = symbol_id(s);
    if (existing >= 0) return existing;
    const int32_t id = n_tokens() + int32_t(extra_symbols_.size());
    extra_symbols_.emplace_back(s);
    extra_by_text_.emplace(extra_symbols_.back(), id);
    return id;
}

const MergeRule *Vocab::merge(int32_t left, int32_t right) const {
    const auto it = merges_.find(pair_key(left, right));
    return it == merges_.end() ? nullptr : &it->second;
}

void Vocab::load_merges(const gguf::GgufFile &file) {
    const gguf::StringArray merges = file.get_string_array(kMergesKey);
    if (merges.empty() && merges_by_token_id_without_merges(pre_)) {
        merges_by_token_id_ = true;
        return;
    }
    if (merges.size() >= uint64_t(std::numeric_limits<int32_t>::max() / 4))
        fail(Status::bad_format, "%s: %s has %llu entries, too many", file.path().c_str(), kMergesKey,
             static_cast<unsigned long long>(merges.size()));
    merges_.reserve(size_t(merges.size()));
    std::string joined;
    size_t i = 0;
    for (const std::string_view m : merges) {
        // The separator is the first space after the first byte, so a left part may be a lone space.
        const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
        if (space == std::string_view::npos || space + 1 >= m.size())
            fail(Status::bad_format, "%s: %s[%zu] '%s' is not two texts separated by a space", file.path().c_str(),
                 kMergesKey, i, printable(m).c_str());
        const std::string_view left = m.substr(0, space), right = m.substr(space + 1);
        joined.assign(left);
        joined += right;
        const int32_t l = intern(left), r = intern(right), result = intern(joined);
        merges_.emplace(pair_key(l, r), MergeRule{int32_t(i), result});  // the first of duplicate merges wins
        ++i;
    }
}

void Vocab::load_special_ids(const gguf::GgufFile &file) {
    const bool spm = kind_ == VocabKind::spm;
    const int32_t n = n_tokens();
    auto id = [&](const char *key, int32_t fallback) -> int32_t {
        const std::optional<uint32_t> v = file.get_u32(key);
        if (!v) return fallback < n ? fallback : -1;
        if (*v >= uint32_t(n))
            fail(Status::bad_format, "%s: %s is %u but the vocabulary has %d tokens", file.path().c_str(), key, *v, n);
        return int32_t(*v);
    };
    bos_ = id("tokenizer.ggml.bos_token_id", spm ? 1 : 11);
    eos_ = id("tokenizer.ggml.eos_token_id", spm ? 2 : 11);
    unk_ = id("tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
    add_bos_ = file.get_bool("tokenizer.ggml.add_bos_token", spm || adds_bos_by_default(pre_));
    add_eos_ = file.get_bool("tokenizer.ggml.add_eos_token", false);
    add_space_prefix_ = file.get_bool("tokenizer.ggml.add_space_prefix", spm);
}

}  // namespace moe::tok
