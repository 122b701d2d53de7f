// tessera inventory: not yet implemented.
#include "cli/commands.hpp"

namespace tessera::cli {

void add_inventory_command(CLI::App&, int&) {}

}  // namespace tessera::cli
