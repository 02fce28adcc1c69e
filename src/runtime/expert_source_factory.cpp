#include "runtime/expert_source_factory.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "common/error.hpp"
#include "common/regular_file.hpp"
#include "common/topology.hpp"
#include "experts/budget_planner.hpp"
#include "experts/gguf_layouts.hpp"
#include "experts/io_mode_choice.hpp"
#include "experts/mmap_expert_source.hpp"
#include "experts/packed_file.hpp"
#include "experts/streaming_source.hpp"
#include "experts/usage_profile.hpp"
#include "io/fault_injection.hpp"
#include "io/read_file.hpp"
#include "model/tensor_roles.hpp"

namespace moe {

namespace {

bool direct_io_available(const std::string &path) {
    try {
        return io::ReadFile(path, true).direct();
    } catch (const Error &) {
        return false;
    }
}

CachePolicyKind policy_kind(int32_t p) {
    switch (p) {
    case MOESTREAM_CACHE_LRU: return CachePolicyKind::lru;
    case MOESTREAM_CACHE_LFU_DECAY: return CachePolicyKind::lfu_decay;
    case MOESTREAM_CACHE_PINNED_HOT: return CachePolicyKind::pinned_hot;
    case MOESTREAM_CACHE_AUTO:  // the default the trace replay judges against Belady
    case MOESTREAM_CACHE_REUSE_AWARE: return CachePolicyKind::reuse_aware;
    default: fail(Status::invalid_argument, "cache_policy %d is not a moestream_cache_policy", p);
    }
}

// Diagnostic override: MOESTREAM_CACHE_SLOTS=N caps the cache at N experts
// (used to exercise tiny caches on small models).
uint32_t slots_override() {
    const char *v = std::getenv("MOESTREAM_CACHE_SLOTS");
    if (!v || !*v) return 0;
    char *end = nullptr;
    const unsigned long n = std::strtoul(v, &end, 10);
    if (*end || n == 0 || n > UINT32_MAX) fail(Status::invalid_argument, "MOESTREAM_CACHE_SLOTS='%s' is not a positive count", v);
    return uint32_t(n);
}

ExpertSourceChoice make_mmap_source(const Model &model, std::vector<ExpertLayerLayout> layouts,
                                    const IoModeRequest &req, const IoModeChoice &choice, Stats &stats) {
    const gguf::GgufFile &file = model.file();
    MmapSourceConfig cfg;
    cfg.layers = std::move(layouts);
    for (const DenseRun &r : dense_runs(dense_tensors(file))) cfg.dense.push_back(MappedRange{r.mapped, r.length});
    cfg.stats = &stats;
    uint64_t max_expert_bytes = 0, max_layer_bytes = 0;
    int32_t max_expert = 0;
    for (const ExpertLayerLayout &l : cfg.layers) {
        max_expert_bytes = std::max(max_expert_bytes, l.bytes_per_expert());
        max_layer_bytes = std::max(max_layer_bytes, l.bytes_per_expert() * uint64_t(std::max(l.n_expert, 0)));
        max_expert = std::max(max_expert, l.n_expert);
    }
    ExpertSharePlanInput plan;
    plan.budget = choice.budget;
    plan.dense_bytes = req.dense_bytes;
    plan.runtime_bytes = req.overhead_bytes;
    plan.expert_bytes = req.expert_bytes;
    plan.min_bytes = max_layer_bytes;
    uint64_t share = plan_expert_share(plan);
    if (const uint32_t cap = slots_override())
        share = std::min(share, uint64_t(std::max<uint32_t>(cap, uint32_t(max_expert))) * max_expert_bytes);
    // The whole model's experts fit: keep everything, never release.
    cfg.expert_share_bytes = share >= req.expert_bytes ? 0 : share;

    ExpertSourceChoice c;
    c.io_mode = MOESTREAM_IO_MMAP;
    c.reason = choice.reason;
    if (cfg.expert_share_bytes == 0) {
        // Nothing is ever released: weights faulted in from now on come in
        // huge pages (a released range would have split them).
        bool huge = false;
        for (size_t i = 0; i < file.n_shards(); ++i) huge = file.shard_mapping(i).advise_huge_pages() || huge;
        if (huge) c.reason += "; huge pages";
    }
    // Give pages back when tasks stall on memory (MOESTREAM_MEMORY_PRESSURE=0: never).
    const char *react = std::getenv("MOESTREAM_MEMORY_PRESSURE");
    // (Nothing to release when no layer has routed experts.)
    if (!(react && std::strcmp(react, "0") == 0) && req.expert_bytes > 0) cfg.pressure = make_system_memory_pressure();
    if (cfg.pressure) c.reason += format("; releases experts under memory pressure (%s)", cfg.pressure->name());
    auto src = std::make_unique<MmapExpertSource>(std::move(cfg));
    if (src->expert_share_bytes())
        c.reason += format("; experts beyond %s released", human_bytes(src->expert_share_bytes()).c_str());
    c.cache_bytes = share;
    c.resident = true;
    c.source = std::move(src);
    return c;
}

// A cache plan's fixed part: the budget, and what the dense weights and the
// runtime take of it before any expert slot.
CachePlanInput cache_plan_for(const IoModeRequest &req, const IoModeChoice &choice) {
    CachePlanInput plan;
    plan.budget = choice.budget;
    plan.dense_bytes = req.dense_bytes;
    plan.runtime_bytes = req.overhead_bytes;
    return plan;
}

// The source of a model whose layers are all dense: no layer routes, so
// nothing ever asks it for an expert.
struct NoExpertSource final : ExpertSource {
    void begin_layer(int32_t layer, std::span<const int32_t> experts) override {
        if (!experts.empty()) fail(Status::internal, "layer %d asked for experts of a model without any", layer);
    }
    ReadyExpert next_ready() override { fail(Status::internal, "an expert was asked of a model without any"); }
    void end_layer(int32_t) override {}
    void prefetch(int32_t, std::span<const int32_t>, int32_t) override {}
    void drain() override {}
};

// Streamed steps read each expert they route to once per chunk, so a long
// prompt in chunks of 64 tokens reads nearly every expert once per 64 tokens.
// When the caller leaves the chunk size to the engine, it grows to 512 or 256
// tokens (at most the context length, which no step can exceed) if the budget
// still plans every slot it did, give or take 1/32 of them (the scratch of a
// Qwen3-30B-A3B-shaped model at 512 tokens is about 140 MiB): prompts then
// read several times fewer bytes, decode keeps its cache.
struct StreamingBatch {
    int32_t max_batch = 0;  // 0: keep the default
    uint32_t slots = 0;
};

StreamingBatch streaming_max_batch(const CachePlanInput &plan, uint32_t slots, const HParams &hp,
                                   const ContextParams &params) {
    const int32_t n_ctx = context_length(hp, params.n_ctx);
    for (const int32_t wanted : {512, 256}) {
        const int32_t batch = std::min(wanted, n_ctx);
        if (batch <= kDefaultMaxBatch) break;  // a context this short steps in default chunks already
        CachePlanInput wider = plan;
        wider.runtime_bytes = runtime_bytes_bound(hp, params.n_ctx, batch, params.n_threads, params.exact);
        try {
            const uint32_t fit = plan_cache_slots(wider);
            if (fit + slots / 32 >= slots) return {batch, fit};
        } catch (const Error &) {
            // The budget cannot hold this chunk's scratch beside a layer's experts: try a smaller one.
        }
    }
    return {};
}

constexpr const char *kNoRoutedExperts = "no layer has routed experts: nothing to stream, the whole model is dense weights";

}  // namespace

ExpertSourceChoice make_expert_source(const Model &model, const ContextParams &params, Stats &stats) {
    const gguf::GgufFile &file = model.file();
    const HParams &hp = model.hparams();
    IoModeRequest req;
    req.requested = params.io_mode;
    req.memory_budget = params.memory_budget;
    req.model_bytes = file.total_file_bytes();
    req.dense_bytes = model.dense_bytes();
    req.expert_bytes = model.expert_bytes();
    // KV cache and fixed allowance, plus the forward pass's batch scratch
    // (resident_bytes counts the real scratch, so the plan must not be short).
    const int32_t max_batch = params.max_batch > 0 ? params.max_batch : kDefaultMaxBatch;
    req.overhead_bytes = runtime_bytes_bound(hp, params.n_ctx, max_batch, params.n_threads, params.exact);
    req.direct_io_available = direct_io_available(file.path());
    const IoModeChoice choice = choose_io_mode_from_env(req);
    // A packed file the caller names must be a file whatever the mode: a
    // mapped model reads none, but a mistyped path or a directory would
    // otherwise pass unnoticed there and fail only once the model streams.
    if (!params.packed_path.empty())
        (void)open_regular_fd_or_fail(params.packed_path, "packed expert file (packed_path)");

    const std::optional<io::FaultPlan> faults = io::fault_plan_from_env();
    if (faults && choice.mode == MOESTREAM_IO_MMAP)
        fail(Status::invalid_argument, "%s='%s' injects faults into expert reads, but this context maps the model (%s); "
             "open with io_mode pread or direct", io::kFaultInjectEnv, faults->spec.c_str(), choice.reason.c_str());
    std::vector<ExpertLayerLayout> layouts = model.expert_layouts();
    const bool no_experts =
        std::none_of(layouts.begin(), layouts.end(), [](const ExpertLayerLayout &l) { return l.n_expert > 0; });
    if (choice.mode == MOESTREAM_IO_MMAP) {
        ExpertSourceChoice c = make_mmap_source(model, std::move(layouts), req, choice, stats);
        if (no_experts) c.reason = std::string(kNoRoutedExperts) + "; " + c.reason;
        if (!params.packed_path.empty()) c.reason += "; packed_path not read: the model is mapped";
        return c;
    }
    if (no_experts) {
        // direct or pread: the dense weights are copied in with reads of that
        // kind (the context does it for a non-resident source), within the budget.
        CachePlanInput plan = cache_plan_for(req, choice);
        plan.min_slots = 0;  // and no slot_bytes: room for the dense weights only
        (void)plan_cache_slots(plan);  // fails when the dense weights and runtime exceed the budget
        ExpertSourceChoice c;
        c.io_mode = choice.mode;
        c.reason = std::string(kNoRoutedExperts) + "; " + choice.reason;
        if (faults) c.reason += format("; fault injection %s has no expert reads to hit", faults->spec.c_str());
        c.cache_bytes = 0;
        c.resident = false;
        c.source = std::make_unique<NoExpertSource>();
        return c;
    }

    ExpertSourceChoice c;
    c.io_mode = choice.mode;
    c.reason = choice.reason;

    StreamingSourceConfig cfg;
    cfg.layers = std::move(layouts);
    cfg.shard_paths = shard_paths_of(file);
    cfg.model_fingerprint = model_fingerprint_of(file);
    cfg.direct = choice.mode == MOESTREAM_IO_DIRECT;
    cfg.backend = cfg.direct ? io::BackendKind::automatic : io::BackendKind::pread;
    cfg.stats = &stats;
    cfg.numa = numa_placement_of(params.numa_placement);
    cfg.policy = policy_kind(params.cache_policy);
    cfg.prefetch_previous =
        params.prefetch == MOESTREAM_PREFETCH_PREVIOUS_TOKEN || params.prefetch == MOESTREAM_PREFETCH_BOTH;

    // A packed file beside the model is used when it matches; a named one must.
    const std::string packed = params.packed_path.empty() ? default_packed_path(file.path()) : params.packed_path;
    std::unique_ptr<PackedFile> pf;
    // A default name that cannot be looked up (too long, a link loop) is no packed file.
    std::error_code no_default;
    if (!params.packed_path.empty() || std::filesystem::exists(packed, no_default)) {
        try {
            auto opened = std::make_unique<PackedFile>(PackedFile::open(packed, cfg.model_fingerprint, cfg.layers));
            // The fingerprint does not cover tensor data: a sample of experts
            // catches a model rewritten with other weights of the same shapes.
            if (const std::string why = packed_sample_mismatch(*opened, ModelExperts{cfg.layers, cfg.shard_paths});
                !why.empty())
                fail(Status::bad_format, "%s", why.c_str());
            cfg.packed_path = packed;
            pf = std::move(opened);
            c.reason += "; packed experts";
        } catch (const Error &e) {
            if (!params.packed_path.empty()) throw;
            c.reason += "; packed file ignored";
        }
    }

    int32_t max_expert = 0;
    uint64_t total_experts = 0;
    for (const auto &l : cfg.layers) {
        max_expert = std::max(max_expert, l.n_expert);
        total_experts += uint64_t(std::max(l.n_expert, 0));
    }
    CachePlanInput plan = cache_plan_for(req, choice);
    plan.slot_bytes = StreamingExpertSource::slot_bytes_for(cfg.layers, pf.get(), cfg.direct);
    plan.min_slots = uint32_t(max_expert);
    plan.max_slots = uint32_t(std::min<uint64_t>(total_experts, UINT32_MAX));
    cfg.slots = plan_cache_slots(plan);
    if (params.max_batch == 0) {
        const StreamingBatch wider = streaming_max_batch(plan, cfg.slots, hp, params);
        if (wider.max_batch > kDefaultMaxBatch) {
            c.max_batch = wider.max_batch;
            cfg.slots = wider.slots;
            c.reason += format("; steps in chunks of %d tokens", wider.max_batch);
        }
    }
    if (const uint32_t cap = slots_override()) cfg.slots = std::max<uint32_t>(std::min(cfg.slots, cap), uint32_t(max_expert));

    std::string profile_path = params.profile_path;
    if (profile_path.empty() && !params.profile_disabled) profile_path = file.path() + ".moeusage";
    auto profile = std::make_shared<UsageProfile>();
    if (!profile_path.empty()) {
        std::string why;
        ProfileLoadFailure failure = ProfileLoadFailure::none;
        if (auto p = load_usage_profile(profile_path, cfg.model_fingerprint, uint32_t(cfg.layers.size()),
                                        uint32_t(max_expert), &why, &failure))
            *profile = std::move(*p);
        else if (failure != ProfileLoadFailure::absent)
            // Not the first run: say why the file was not used, and what close will do with it.
            params.log.write(MOESTREAM_LOG_WARN, "usage profile ignored: %s%s", why.c_str(),
                             failure == ProfileLoadFailure::unusable ? " (replaced at close)" : "");
        cfg.profile_save_path = profile_path;
        cfg.log = params.log;
    }
    // Without a profile the policies still learn from the model's shape (the
    // reuse-aware policy measures per layer, by layer visit); zero counts pin nothing.
    if (profile->counts.empty())
        *profile = UsageProfile{uint32_t(cfg.layers.size()), uint32_t(max_expert),
                                std::vector<uint64_t>(cfg.layers.size() * size_t(max_expert), 0)};
    cfg.profile = profile.get();

    if (faults) {
        // Diagnostic: MOESTREAM_FAULT_INJECT (docs/errors.md); packed extents are checksummed as they arrive.
        cfg.backend_override = std::make_unique<io::FaultInjectingBackend>(
            io::make_read_backend(cfg.backend, std::max<uint32_t>(cfg.queue_depth, 4)), io::make_fault_rule(*faults));
        cfg.verify_checksums = true;
        c.reason += format("; fault injection %s", faults->spec.c_str());
    }
    auto src = std::make_unique<StreamingExpertSource>(std::move(cfg));
    c.cache_bytes = src->cache_bytes();
    c.reason += format("; %u slots, %s reads; cache memory %s", src->slots(), src->backend_name(),
                       src->cache_placement().c_str());
    // The backends bind their I/O threads to the CPUs near the model's
    // device; the lookup is cached, so this names the same choice.
    const topology::DevicePlacement near = topology::placement_for_path(file.path());
    c.reason += format("; I/O threads on CPUs %s (%s)", topology::cpu_list_text(near.cpus).c_str(), near.how.c_str());
    c.resident = false;
    // The profile must outlive the source: hand both over together.
    struct Owning final : ExpertSource {
        std::shared_ptr<UsageProfile> profile;
        std::unique_ptr<StreamingExpertSource> inner;
        void begin_layer(int32_t l, std::span<const int32_t> e) override { inner->begin_layer(l, e); }
        ReadyExpert next_ready() override { return inner->next_ready(); }
        bool try_next_ready(ReadyExpert &out) override { return inner->try_next_ready(out); }
        void progress() override { inner->progress(); }
        void end_layer(int32_t l) override { inner->end_layer(l); }
        void prefetch(int32_t l, std::span<const int32_t> e, int32_t distance) override {
            inner->prefetch(l, e, distance);
        }
        void drain() override { inner->drain(); }
        io::ObservedBackend *observed_reads() const override { return inner->observed_reads(); }
    };
    auto owning = std::make_unique<Owning>();
    owning->profile = std::move(profile);
    owning->inner = std::move(src);
    c.source = std::move(owning);
    return c;
}

}  // namespace moe
