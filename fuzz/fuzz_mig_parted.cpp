// Any bytes given to the mig-parted reader end in a config or in diagnostics;
// a parsed config is then validated against the whole catalog.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/mig_parted.hpp"
#include "config/mig_parted_validate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tessera::config::Diagnostics diags;
  auto config = tessera::config::parse_mig_parted(text, "fuzz.yaml", diags);
  if (config) {
    tessera::config::validate_mig_parted(*config, tessera::Catalog::builtin(), {}, diags);
    tessera::config::MigValidateOptions strict;
    strict.gpu = &tessera::Catalog::builtin().models()[1];
    tessera::config::validate_mig_parted(*config, tessera::Catalog::builtin(), strict, diags);
  }
  for (const auto& d : diags.items()) (void)tessera::config::format(d);
  return 0;
}
