// Builds without per-ISA kernel files keep the scalar kernels for every ISA.
#include "kernels/dispatch.hpp"

namespace moe::kernels::detail {

void fill_avx2_kernels(KernelTable &) {}
void fill_avx512_kernels(KernelTable &) {}
bool isa_has_kernels(Isa isa) { return isa == Isa::scalar; }

}  // namespace moe::kernels::detail
