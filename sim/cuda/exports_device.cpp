// cuDeviceGetAttribute ([CH] "Device Management"): the device's model
// (gpu_models.cpp) answers every attribute of CUDA 13.0's CUdevice_attribute.
#include "entry.hpp"

using namespace tessera_cuda_sim;

// [CH]: NOT_INITIALIZED before cuInit; INVALID_VALUE for a NULL pi or an
// attribute number outside the enum; INVALID_DEVICE for a bad ordinal.
TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(d, dev)) return CUDA_ERROR_INVALID_DEVICE;
    int value = 0;
    if (!device_attribute(*d.devices[static_cast<std::size_t>(dev)].model, dev, attrib, value))
      return CUDA_ERROR_INVALID_VALUE;
    *pi = value;
    return CUDA_SUCCESS;
  });
}
