// `tessera completion bash|zsh|fish`: a shell completion script made from the
// command tree itself, so it never lags behind a new command or flag.
#pragma once

#include <optional>
#include <string>

namespace CLI {
class App;
}

namespace tessera::cli {

// The script for `shell` (bash, zsh or fish); nullopt for another shell.
std::optional<std::string> completion_script(CLI::App& app, const std::string& shell);

}  // namespace tessera::cli
