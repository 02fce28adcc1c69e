// moestream pack: writes (or checks) the packed expert file beside a model.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "cli_util.hpp"
#include "commands.hpp"
#include "model_options.hpp"
#include "moestream.h"

namespace cli {
namespace {

const char *kUsage =
    "usage: moestream pack MODEL [-o OUT] [--verify]\n"
    "Writes a packed expert file (default MODEL.moepack): every routed expert as one\n"
    "4 KiB-aligned extent, so a cache miss is one read. open uses it automatically\n"
    "when it matches the model.\n"
    "  -o, --output OUT   where to write (default MODEL.moepack)\n"
    "  --verify           only check an existing packed file: every expert's checksum\n"
    "                     and that it belongs to MODEL\n";

}  // namespace

int cmd_pack(const Args &args) {
    ParsedArgs p;
    std::string error;
    if (!parse_args(args, {"--output"}, {"--verify", "--help"}, p, error, {{"-o", "--output"}, {"-h", "--help"}}))
        return usage_error("pack", error);
    if (p.has("--help")) {
        std::fputs(kUsage, stdout);
        return 0;
    }
    if (p.positional.size() != 1) return usage_error("pack", "expected one MODEL argument");
    if (const std::string empty = empty_file_name(p, {"--output"}); !empty.empty()) return usage_error("pack", empty);
    const std::string model = p.positional[0];
    const std::string out = p.get_or("--output", model + ".moepack");
    if (p.has("--verify")) {
        uint64_t checked = 0, bad = 0;
        const int rc = moestream_pack_verify(out.c_str(), model.c_str(), &checked, &bad);
        if (rc != MOESTREAM_OK) {
            report_error("pack --verify", "moestream_pack_verify", rc);
            return 1;
        }
        std::printf("%s: %" PRIu64 " experts verified, all intact\n", out.c_str(), checked);
        return 0;
    }
    // The library renames a fresh temporary over OUT, which therefore must
    // not be the model, nor any other shard of a split one.
    if (const std::string why = output_conflict(out, model_shards(model)); !why.empty()) {
        std::fprintf(stderr, "moestream pack: %s\n", why.c_str());
        return 1;
    }
    const int rc = moestream_pack(model.c_str(), out.c_str());
    if (rc != MOESTREAM_OK) {
        report_error("pack", "moestream_pack", rc);
        return 1;
    }
    std::printf("wrote %s\n", out.c_str());
    return 0;
}

}  // namespace cli
