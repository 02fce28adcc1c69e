#include "common/huge_pages.hpp"

#include <sys/mman.h>

#include <fstream>
#include <iterator>

namespace moe {
namespace {

ThpMode read_mode_file(const std::string &path) {
    std::ifstream in(path);
    if (!in) return ThpMode::unknown;
    return parse_thp_mode(std::string(std::istreambuf_iterator<char>(in), {}));
}

}  // namespace

ThpMode parse_thp_mode(std::string_view text) {
    const size_t open = text.find('[');
    const size_t close = open == std::string_view::npos ? open : text.find(']', open);
    if (close == std::string_view::npos) return ThpMode::unknown;
    const std::string_view selected = text.substr(open + 1, close - open - 1);
    if (selected == "always") return ThpMode::always;
    if (selected == "madvise") return ThpMode::madvise;
    if (selected == "never") return ThpMode::never;
    if (selected == "inherit") return ThpMode::inherit;
    return ThpMode::unknown;
}

ThpMode read_thp_mode(const std::string &thp_dir) {
    const ThpMode per_size = read_mode_file(thp_dir + "/hugepages-2048kB/enabled");
    if (per_size != ThpMode::unknown && per_size != ThpMode::inherit) return per_size;
    const ThpMode global = read_mode_file(thp_dir + "/enabled");
    return global == ThpMode::inherit ? ThpMode::unknown : global;
}

ThpMode thp_mode() {
    static const ThpMode mode = read_thp_mode("/sys/kernel/mm/transparent_hugepage");
    return mode;
}

bool advise_huge_pages(void *data, size_t len, ThpMode mode) {
#ifdef MADV_HUGEPAGE
    if (!data || len == 0 || mode == ThpMode::never) return false;
    return ::madvise(data, len, MADV_HUGEPAGE) == 0;
#else
    (void)data, (void)len, (void)mode;
    return false;
#endif
}

}  // namespace moe
