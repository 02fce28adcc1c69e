// Access to the kernel table of an ISA (dispatch.cpp).
#pragma once

#include "kernels/kernels_internal.hpp"

namespace moe::kernels::detail {

const KernelTable &kernel_table(Isa isa);
// Whether this build has kernels for the ISA (simd_*.cpp compiled in).
bool isa_has_kernels(Isa isa);

}  // namespace moe::kernels::detail
