// ISA selection: the best the CPU supports, MOESTREAM_ISA to lower it, and
// set_isa for tests and benchmarks.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/dispatch.hpp"

namespace moe::kernels {
namespace {

bool cpu_supports(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
    case Isa::avx512:
        return cpu_supports(Isa::avx2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni") &&
               __builtin_cpu_supports("avx512bf16");
    }
    return false;
#else
    return isa == Isa::scalar;
#endif
}

Isa best_supported() {
    for (Isa isa : {Isa::avx512, Isa::avx2})
        if (detail::isa_has_kernels(isa) && cpu_supports(isa)) return isa;
    return Isa::scalar;
}

Isa initial_isa() {
    Isa best = best_supported();
    const char *env = std::getenv("MOESTREAM_ISA");
    if (env && *env) {
        Isa wanted = best;
        if (!std::strcmp(env, "scalar")) wanted = Isa::scalar;
        else if (!std::strcmp(env, "avx2")) wanted = Isa::avx2;
        else if (!std::strcmp(env, "avx512")) wanted = Isa::avx512;
        if (static_cast<int>(wanted) < static_cast<int>(best)) best = wanted;  // clamp to the CPU
    }
    return best;
}

std::atomic<int> g_isa{-1};

}  // namespace

Isa active_isa() {
    int v = g_isa.load(std::memory_order_acquire);
    if (v < 0) {
        int expected = -1;
        g_isa.compare_exchange_strong(expected, static_cast<int>(initial_isa()), std::memory_order_acq_rel);
        v = g_isa.load(std::memory_order_acquire);
    }
    return static_cast<Isa>(v);
}

const char *isa_name(Isa isa) {
    switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    }
    return "unknown";
}

bool set_isa(Isa isa) {
    if (!cpu_supports(isa) || !detail::isa_has_kernels(isa)) return false;
    g_isa.store(static_cast<int>(isa), std::memory_order_release);
    return true;
}

namespace detail {

const KernelTable &kernel_table(Isa isa) {
    static const KernelTable tables[3] = {
        [] { KernelTable t; fill_scalar_kernels(t); return t; }(),
        [] { KernelTable t; fill_scalar_kernels(t); fill_avx2_kernels(t); return t; }(),
        [] { KernelTable t; fill_scalar_kernels(t); fill_avx2_kernels(t); fill_avx512_kernels(t); return t; }(),
    };
    return tables[static_cast<int>(isa)];
}

}  // namespace detail
}  // namespace moe::kernels
