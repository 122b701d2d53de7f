#include "sim_node.hpp"

#include <cstdlib>
#include <stdexcept>

#include "support/sim_nvml.hpp"

namespace tessera::testing {

namespace {

// `tessera` processes name their node on the command line; an inherited
// TESSERA_SIM (--sim's variable, and the default of `tessera sim`'s DIR)
// must not steer them elsewhere.
const std::vector<std::string> kNoSimEnv = {"TESSERA_SIM="};

}  // namespace

SimNode::SimNode(const std::string& model, uint32_t count, const std::vector<std::string>& extra)
    : dir_(tmp_.path() + "/node") {
  std::vector<std::string> argv = {kBin, "sim", "create", dir_, "--gpu", model, "--count", std::to_string(count)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto r = run(argv, "", kNoSimEnv);
  if (r.exit_code != 0) throw std::runtime_error("tessera sim create failed: " + r.err);
}

nvml::Session SimNode::open() const {
  // The simulator reads its directory from TESSERA_SIM at nvmlInit_v2; set
  // only for the open, as --sim's own variable must not reach the `tessera`
  // processes the test starts later (support/sim_nvml.hpp).
  ScopedSimEnv env(dir_);
  auto lib = nvml::Library::open(kSimLibrary);
  if (!lib) throw std::runtime_error(lib.error().message);
  auto session = nvml::Session::open(std::move(*lib));
  if (!session) throw std::runtime_error(session.error().message());
  return std::move(*session);
}

RunResult SimNode::tessera(std::vector<std::string> args, bool with_sim) const {
  args.insert(args.begin(), kBin);
  if (with_sim) {
    args.push_back("--sim");
    args.push_back(dir_);
  }
  return run(args, "", kNoSimEnv);
}

void SimNode::drive(const std::string& sub, const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {kBin, "sim", sub, dir_};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run(argv, "", kNoSimEnv);
  if (r.exit_code != 0) throw std::runtime_error("tessera sim " + sub + " failed: " + r.err);
}

}  // namespace tessera::testing
