// Packed expert file: moestream_pack and moestream_pack_verify.
#include "experts/gguf_layouts.hpp"
#include "experts/packed_file.hpp"
#include "firewall.hpp"
#include "gguf/gguf_file.hpp"

extern "C" {

MOESTREAM_API int moestream_pack(const char *model_path, const char *out_path) {
    return moe::capi::guarded(__func__, [&] {
        moe::capi::require(model_path, "model_path");
        auto file = moe::gguf::GgufFile::open(model_path);
        const auto layouts = moe::expert_layouts_from_gguf(*file);
        const std::string out = out_path ? std::string(out_path) : moe::default_packed_path(model_path);
        moe::write_packed_file(out, moe::model_fingerprint_of(*file), layouts, moe::shard_paths_of(*file));
    });
}

MOESTREAM_API int moestream_pack_verify(const char *packed_path, const char *model_path, uint64_t *experts_checked,
                                        uint64_t *bad_experts) {
    return moe::capi::guarded(__func__, [&] {
        moe::capi::require(packed_path, "packed_path");
        if (experts_checked) *experts_checked = 0;
        if (bad_experts) *bad_experts = 0;
        std::unique_ptr<moe::gguf::GgufFile> file;
        std::vector<moe::ExpertLayerLayout> layouts;
        std::vector<std::string> shards;
        if (model_path) {
            file = moe::gguf::GgufFile::open(model_path);
            layouts = moe::expert_layouts_from_gguf(*file);
            shards = moe::shard_paths_of(*file);
            moe::PackedFile::open(packed_path, moe::model_fingerprint_of(*file), layouts);
        }
        // With the model, every expert is also compared with the model's bytes.
        const moe::ModelExperts model{layouts, shards};
        const moe::PackedVerifyReport r = moe::verify_packed_file(packed_path, model_path ? &model : nullptr);
        if (experts_checked) *experts_checked = r.experts_checked;
        if (bad_experts) *bad_experts = r.bad_experts;
        if (r.bad_experts)
            moe::fail(moe::Status::bad_format, "%llu of %llu experts damaged%s; first: %s",
                      (unsigned long long)r.bad_experts, (unsigned long long)r.experts_checked,
                      model_path ? " or not the model's" : "", r.first_problem.c_str());
    });
}

}  // extern "C"
