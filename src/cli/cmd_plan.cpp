// tessera plan: not yet implemented.
#include "cli/commands.hpp"

namespace tessera::cli {

void add_plan_command(CLI::App&, int&) {}

}  // namespace tessera::cli
