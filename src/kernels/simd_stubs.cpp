// ISA kernel files present in this build.
#include "kernels/dispatch.hpp"

namespace moe::kernels::detail {

void fill_avx512_kernels(KernelTable &) {}
bool isa_has_kernels(Isa isa) { return isa == Isa::scalar || isa == Isa::avx2; }

}  // namespace moe::kernels::detail
