#include "nvml/error.hpp"

#include <array>
#include <utility>

namespace tessera::nvml {
namespace {

using namespace abi;

constexpr std::array<std::pair<Return, std::string_view>, 32> kNames{{
    {NVML_SUCCESS, "NVML_SUCCESS"},
    {NVML_ERROR_UNINITIALIZED, "NVML_ERROR_UNINITIALIZED"},
    {NVML_ERROR_INVALID_ARGUMENT, "NVML_ERROR_INVALID_ARGUMENT"},
    {NVML_ERROR_NOT_SUPPORTED, "NVML_ERROR_NOT_SUPPORTED"},
    {NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION"},
    {NVML_ERROR_ALREADY_INITIALIZED, "NVML_ERROR_ALREADY_INITIALIZED"},
    {NVML_ERROR_NOT_FOUND, "NVML_ERROR_NOT_FOUND"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "NVML_ERROR_INSUFFICIENT_SIZE"},
    {NVML_ERROR_INSUFFICIENT_POWER, "NVML_ERROR_INSUFFICIENT_POWER"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "NVML_ERROR_DRIVER_NOT_LOADED"},
    {NVML_ERROR_TIMEOUT, "NVML_ERROR_TIMEOUT"},
    {NVML_ERROR_IRQ_ISSUE, "NVML_ERROR_IRQ_ISSUE"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML_ERROR_LIBRARY_NOT_FOUND"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "NVML_ERROR_FUNCTION_NOT_FOUND"},
    {NVML_ERROR_CORRUPTED_INFOROM, "NVML_ERROR_CORRUPTED_INFOROM"},
    {NVML_ERROR_GPU_IS_LOST, "NVML_ERROR_GPU_IS_LOST"},
    {NVML_ERROR_RESET_REQUIRED, "NVML_ERROR_RESET_REQUIRED"},
    {NVML_ERROR_OPERATING_SYSTEM, "NVML_ERROR_OPERATING_SYSTEM"},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVML_ERROR_LIB_RM_VERSION_MISMATCH"},
    {NVML_ERROR_IN_USE, "NVML_ERROR_IN_USE"},
    {NVML_ERROR_MEMORY, "NVML_ERROR_MEMORY"},
    {NVML_ERROR_NO_DATA, "NVML_ERROR_NO_DATA"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "NVML_ERROR_INSUFFICIENT_RESOURCES"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "NVML_ERROR_FREQ_NOT_SUPPORTED"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH"},
    {NVML_ERROR_DEPRECATED, "NVML_ERROR_DEPRECATED"},
    {NVML_ERROR_NOT_READY, "NVML_ERROR_NOT_READY"},
    {NVML_ERROR_GPU_NOT_FOUND, "NVML_ERROR_GPU_NOT_FOUND"},
    {NVML_ERROR_INVALID_STATE, "NVML_ERROR_INVALID_STATE"},
    {NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED"},
    {NVML_ERROR_UNKNOWN, "NVML_ERROR_UNKNOWN"},
}};

}  // namespace

std::string return_name(Return code) {
  for (const auto& [c, name] : kNames)
    if (c == code) return std::string(name);
  return "NVML_ERROR_" + std::to_string(static_cast<int>(code));
}

bool parse_return_name(std::string_view name, Return& code) {
  for (const auto& [c, full] : kNames) {
    std::string_view shortName = full.substr(full.starts_with("NVML_ERROR_") ? 11 : 5);
    if (name == full || name == shortName) {
      code = c;
      return true;
    }
  }
  return false;
}

std::string Error::message() const {
  std::string m = call;
  if (!context.empty()) m += " (" + context + ")";
  return m + ": " + return_name(code);
}

tessera::Error Error::to_error() const {
  Errc errc = Errc::driver;
  switch (code) {
    case NVML_ERROR_NOT_FOUND:
      errc = Errc::not_found;
      break;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      errc = Errc::unsupported;
      break;
    case NVML_ERROR_INVALID_ARGUMENT:
      errc = Errc::invalid_argument;
      break;
    case NVML_ERROR_IN_USE:
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      errc = Errc::conflict;
      break;
    default:
      break;
  }
  return tessera::Error{errc, message()};
}

}  // namespace tessera::nvml
