// tessera sim: not yet implemented.
#include "cli/commands.hpp"

namespace tessera::cli {

void add_sim_command(CLI::App&, int&) {}

}  // namespace tessera::cli
