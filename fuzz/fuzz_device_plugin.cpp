// Any bytes given to the device-plugin config reader end in a config or in
// diagnostics, never in a crash, a hang or a leak.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/device_plugin.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tessera::config::Diagnostics diags;
  auto config = tessera::config::parse_device_plugin_config(text, "fuzz.yaml", diags);
  if (config && config->sharing()) (void)config->sharing()->resources.size();
  for (const auto& d : diags.items()) (void)tessera::config::format(d);
  return 0;
}
