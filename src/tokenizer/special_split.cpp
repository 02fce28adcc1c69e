#include "tokenizer/special_split.hpp"

namespace moe::tok {

void split_special(const Vocab &vocab, std::string_view text, bool parse_special, std::vector<Fragment> &out,
                   std::vector<Fragment> &scratch) {
    out.clear();
    if (text.empty()) return;
    out.push_back({-1, 0, text.size()});
    for (const int32_t id : vocab.special_tokens()) {
        if (!parse_special && vocab.type(id) != TokenType::user_defined) continue;
        const std::string_view special = vocab.text(id);
        bool rebuilding = false;  // scratch holds out[0, i) re-split once the first hit is seen
        for (size_t i = 0; i < out.size(); ++i) {
            const Fragment f = out[i];
            size_t hit = std::string_view::npos;
            if (f.token < 0 && f.end - f.begin >= special.size()) hit = text.substr(0, f.end).find(special, f.begin);
            if (hit == std::string_view::npos) {
                if (rebuilding) scratch.push_back(f);
                continue;
            }
            if (!rebuilding) {
                scratch.assign(out.begin(), out.begin() + std::ptrdiff_t(i));
                rebuilding = true;
            }
            size_t pos = f.begin;
            while (hit != std::string_view::npos) {
                if (hit > pos) scratch.push_back({-1, pos, hit});
                scratch.push_back({id, hit, hit + special.size()});
                pos = hit + special.size();
                hit = text.substr(0, f.end).find(special, pos);
            }
            if (pos < f.end) scratch.push_back({-1, pos, f.end});
        }
        if (rebuilding) out.swap(scratch);
    }
}

}  // namespace moe::tok
