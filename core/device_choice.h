// Where a run computes (train.device, `eval --device`, `generate --device`): auto, cpu or cuda.
#pragma once

#include <array>

#include "core/config_fields.h"

namespace braid {

enum class DeviceChoice { Auto, Cpu, Cuda };

constexpr std::array<EnumName<DeviceChoice>, 3> config_enum_names(DeviceChoice) {
  return {{{DeviceChoice::Auto, "auto"}, {DeviceChoice::Cpu, "cpu"}, {DeviceChoice::Cuda, "cuda"}}};
}

}  // namespace braid
