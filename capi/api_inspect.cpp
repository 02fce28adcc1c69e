// moestream_inspect and the name helpers: model facts without loading weights.
// inspect checks the file as open binds it (Model::check), so it refuses what
// open refuses, with the same status and message.
#include <cstring>
#include <string>

#include "common/ggml_types.hpp"
#include "experts/budget_planner.hpp"
#include "experts/io_mode_choice.hpp"
#include "firewall.hpp"
#include "model_info.hpp"
#include "gguf/gguf_file.hpp"
#include "io/read_file.hpp"
#include "model/hparams.hpp"
#include "model/model.hpp"
#include "model/tensor_roles.hpp"
#include "runtime/context.hpp"

namespace {

// Whether the file system accepts O_DIRECT for this file (tmpfs, for one, does not).
bool direct_io_available(const std::string &path) {
    try {
        return moe::io::ReadFile(path, true).direct();
    } catch (const moe::Error &) {
        return false;
    }
}

}  // namespace

extern "C" {

MOESTREAM_API void moestream_model_info_init(moestream_model_info *info) {
    moe::capi::guarded("moestream_model_info_init", [&] {
        moe::capi::require(info, "info");
        std::memset(info, 0, sizeof *info);
        info->struct_size = sizeof *info;
        info->io_mode = MOESTREAM_IO_AUTO;
    });
}

MOESTREAM_API const char *moestream_type_name(int type_id) {
    if (type_id < 0) return "?";
    const char *name = moe::type_traits(static_cast<uint32_t>(type_id)).name;
    return name ? name : "?";
}

MOESTREAM_API const char *moestream_io_mode_name(int io_mode) {
    const char *name = moe::io_mode_name(io_mode);
    return name ? name : "?";
}

MOESTREAM_API int moestream_inspect(const char *model_path, uint64_t memory_budget, moestream_model_info *out) {
    return moe::capi::guarded("moestream_inspect", [&] {
        moe::capi::require(model_path, "model_path");
        moe::capi::require(out, "out");
        moe::capi::require_struct_size(out->struct_size, sizeof(moestream_model_info), "moestream_model_info");
        const auto file = moe::gguf::GgufFile::open(model_path);
        const auto [hp, bytes] = moe::Model::check(*file);

        moe::IoModeRequest request;
        request.memory_budget = memory_budget;
        request.model_bytes = file->total_file_bytes();
        request.dense_bytes = bytes.dense;
        request.expert_bytes = bytes.expert;
        // As a context opened with default parameters would count it,
        // batch scratch included, so the mode printed is the mode open picks.
        const moe::ContextParams defaults;
        request.overhead_bytes =
            moe::runtime_bytes_bound(hp, defaults.n_ctx, defaults.max_batch, defaults.n_threads);
        request.direct_io_available = direct_io_available(model_path);
        const moe::IoModeChoice choice = moe::choose_io_mode_from_env(request);

        *out = moe::capi::make_model_info(hp, bytes, file->total_file_bytes(), choice.mode, choice.reason);
    });
}

}  // extern "C"
