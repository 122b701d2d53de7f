// The GPU models a simulated device can be, and what cuDeviceGetName and
// cuDeviceGetAttribute answer for each: the simulator's own small table
// (gpu_models.cpp), each figure with its source. It links nothing of the
// product (tessera's catalog lives in src/core; the keys here are the same
// names so that one TESSERA_SIM_CUDA_DEVICES value reads like the other).
#pragma once

#include <span>
#include <string_view>

#include "cuda_api.hpp"

namespace tessera_cuda_sim {

struct GpuModel {
  const char* key;   // "H100-SXM5-80GB": what TESSERA_SIM_CUDA_DEVICES names
  const char* name;  // cuDeviceGetName: "NVIDIA H100 80GB HBM3"
  int cc_major, cc_minor;
  int sm_count;
  int clock_khz;         // CU_DEVICE_ATTRIBUTE_CLOCK_RATE: the maximum SM clock
  int memory_clock_khz;  // CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE
  int bus_width_bits;    // CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH
  int l2_bytes;          // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
  int copy_engines;      // CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT
  int pci_id;            // CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID: device << 16 | vendor 0x10DE
};

// Every model the simulator knows, and the one a device without a model gets.
std::span<const GpuModel> gpu_models();
const GpuModel& default_gpu_model();

// By key ("H100-SXM5-80GB") or NVIDIA name, with or without "NVIDIA "
// ("NVIDIA H100 80GB HBM3", "H200"), ASCII case-insensitive; NULL if none.
const GpuModel* find_gpu_model(std::string_view text);

// cuDeviceGetAttribute's answer for `attribute` on device `ordinal` of
// `model`: false for a number outside CUDA 13.0's CUdevice_attribute.
bool device_attribute(const GpuModel& model, int ordinal, int attribute, int& value);

}  // namespace tessera_cuda_sim
