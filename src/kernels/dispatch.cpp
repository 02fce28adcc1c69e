// ISA selection: the best the CPU supports, MOESTREAM_ISA to lower it, and
// set_isa for tests and benchmarks.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/dispatch.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace moe::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// Feature bits read with cpuid (works with every compiler, unlike the
// feature names __builtin_cpu_supports accepts), plus the OS check that the
// vector register state is saved on context switches (xgetbv).
struct CpuFeatures {
    bool avx2 = false, avx512 = false;
};

uint64_t xcr0() {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

CpuFeatures read_cpu_features() {
    CpuFeatures f;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
    if (!osxsave || !avx) return f;
    const uint64_t xcr = xcr0();
    const bool os_avx = (xcr & 0x6) == 0x6, os_avx512 = (xcr & 0xE6) == 0xE6;
    if (__get_cpuid_max(0, nullptr) < 7) return f;
    __cpuid_count(7, 0, a, b, c, d);
    const bool avx2 = b & (1u << 5), bmi2 = b & (1u << 8);
    const bool avx512f = b & (1u << 16), avx512dq = b & (1u << 17), avx512bw = b & (1u << 30),
               avx512vl = b & (1u << 31), avx512vnni = c & (1u << 11);
    f.avx2 = os_avx && avx2 && fma && f16c && bmi2;
    // No BF16 instruction is used (BF16 weights are widened exactly, since
    // vdpbf16ps flushes denormals), so VNNI-only parts (Cascade Lake, Ice
    // Lake) get the AVX-512 kernels too.
    f.avx512 = f.avx2 && os_avx512 && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni;
    return f;
}

bool cpu_supports(Isa isa) {
    static const CpuFeatures f = read_cpu_features();
    switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return f.avx2;
    case Isa::avx512: return f.avx512;
    }
    return false;
}
#else
bool cpu_supports(Isa isa) { return isa == Isa::scalar; }
#endif

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
        [] { KernelTable t; fill_scalar_kernels(t); fill_avx2_kernels(t); fill_avx2_act_kernels(t); return t; }(),
        [] {
            KernelTable t;
            fill_scalar_kernels(t);
            fill_avx2_kernels(t);
            fill_avx2_act_kernels(t);
            fill_avx512_kernels(t);
            return t;
        }(),
    };
    return tables[static_cast<int>(isa)];
}

}  // namespace detail
}  // namespace moe::kernels
