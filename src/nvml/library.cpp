#include "nvml/library.hpp"

#include <dlfcn.h>

#include <type_traits>

namespace tessera::nvml {

const std::vector<SymbolSpec>& bound_symbols() {
  static const std::vector<SymbolSpec> symbols = {
#define TESSERA_NVML_REQUIRED_SPEC(ret, name, params) SymbolSpec{#name, true},
#define TESSERA_NVML_OPTIONAL_SPEC(ret, name, params) SymbolSpec{#name, false},
      TESSERA_NVML_FUNCTIONS(TESSERA_NVML_REQUIRED_SPEC, TESSERA_NVML_OPTIONAL_SPEC)
#undef TESSERA_NVML_REQUIRED_SPEC
#undef TESSERA_NVML_OPTIONAL_SPEC
  };
  return symbols;
}

tessera::Result<std::shared_ptr<const Library>> Library::open(const std::string& path) {
  dlerror();
  // RTLD_LOCAL: NVML's symbols must not satisfy anyone else's lookups.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return tessera::fail(Errc::not_found, "cannot load " + path + ": " + (why ? why : "unknown dlopen error"));
  }
  std::shared_ptr<Library> lib(new Library(handle, path));
  std::string missing;
  auto bind = [&](void* sym, const char* name, bool required, auto& member) {
    if (!sym && required && missing.empty()) missing = name;
    member = reinterpret_cast<std::remove_reference_t<decltype(member)>>(sym);
  };
#define TESSERA_NVML_BIND_REQUIRED(ret, name, params) bind(dlsym(handle, #name), #name, true, lib->api_.name);
#define TESSERA_NVML_BIND_OPTIONAL(ret, name, params) bind(dlsym(handle, #name), #name, false, lib->api_.name);
  TESSERA_NVML_FUNCTIONS(TESSERA_NVML_BIND_REQUIRED, TESSERA_NVML_BIND_OPTIONAL)
#undef TESSERA_NVML_BIND_REQUIRED
#undef TESSERA_NVML_BIND_OPTIONAL
  if (!missing.empty())
    return tessera::fail(Errc::unsupported, path + " lacks the NVML symbol " + missing +
                                                " (tessera needs an NVIDIA driver of branch R470 or newer)");
  return std::shared_ptr<const Library>(std::move(lib));
}

Library::~Library() {
  if (handle_) dlclose(handle_);
}

void* Library::symbol(const char* name) const { return dlsym(handle_, name); }

}  // namespace tessera::nvml
