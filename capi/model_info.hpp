// Fills the public moestream_model_info from the model's facts; shared by
// moestream_inspect (no context) and moestream_model_info_get (open context).
#pragma once

#include <cstdint>
#include <string>

#include "model/hparams.hpp"
#include "model/tensor_roles.hpp"
#include "moestream.h"

namespace moe::capi {

moestream_model_info make_model_info(const HParams &hp, const ModelBytes &bytes, uint64_t file_bytes,
                                     int32_t io_mode, const std::string &io_mode_reason);

}  // namespace moe::capi
