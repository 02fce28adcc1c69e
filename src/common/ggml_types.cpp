#include "common/ggml_types.hpp"

namespace moe {
namespace {

struct Table {
    TypeTraits entries[kMaxGgmlTypeId] = {};
    constexpr Table() {
        set(GgmlType::F32, "f32", 1, 4, true);
        set(GgmlType::F16, "f16", 1, 2, true);
        set(GgmlType::Q4_0, "q4_0", 32, 18, true);
        set(GgmlType::Q4_1, "q4_1", 32, 20, true);
        set(GgmlType::Q5_0, "q5_0", 32, 22, true);
        set(GgmlType::Q5_1, "q5_1", 32, 24, true);
        set(GgmlType::Q8_0, "q8_0", 32, 34, true);
        set(GgmlType::Q8_1, "q8_1", 32, 36, false);
        set(GgmlType::Q2_K, "q2_K", 256, 84, true);
        set(GgmlType::Q3_K, "q3_K", 256, 110, true);
        set(GgmlType::Q4_K, "q4_K", 256, 144, true);
        set(GgmlType::Q5_K, "q5_K", 256, 176, true);
        set(GgmlType::Q6_K, "q6_K", 256, 210, true);
        set(GgmlType::Q8_K, "q8_K", 256, 292, false);
        set(GgmlType::IQ4_NL, "iq4_nl", 32, 18, true);
        set(GgmlType::IQ4_XS, "iq4_xs", 256, 136, true);
        set(GgmlType::BF16, "bf16", 1, 2, true);
        set(GgmlType::MXFP4, "mxfp4", 32, 17, true);
        // Known layouts the engine does not compute with (still parseable).
        set(16, "iq2_xxs", 256, 66);
        set(17, "iq2_xs", 256, 74);
        set(18, "iq3_xxs", 256, 98);
        set(19, "iq1_s", 256, 50);
        set(21, "iq3_s", 256, 110);
        set(22, "iq2_s", 256, 82);
        set(24, "i8", 1, 1);
        set(25, "i16", 1, 2);
        set(26, "i32", 1, 4);
        set(27, "i64", 1, 8);
        set(28, "f64", 1, 8);
        set(29, "iq1_m", 256, 56);
        set(34, "tq1_0", 256, 54);
        set(35, "tq2_0", 256, 66);
    }
    constexpr void set(GgmlType t, const char *name, uint32_t be, uint32_t bb, bool supported) {
        entries[static_cast<uint32_t>(t)] = TypeTraits{name, be, bb, supported};
    }
    constexpr void set(uint32_t id, const char *name, uint32_t be, uint32_t bb) {
        entries[id] = TypeTraits{name, be, bb, false};
    }
};

constexpr Table kTable;
constexpr TypeTraits kUnknown{nullptr, 0, 0, false};

}  // namespace

const TypeTraits &type_traits(uint32_t type_id) {
    return type_id < kMaxGgmlTypeId ? kTable.entries[type_id] : kUnknown;
}

}  // namespace moe
