// How the commands that talk to the API server (node, dra, fleet) find it:
// --kubeconfig, else $KUBECONFIG, else ~/.kube/config, else the pod's service account.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "core/error.hpp"
#include "kube/client.hpp"

namespace tessera::cli {

struct KubeArgs {
  std::string kubeconfig;
  bool allow_insecure_http = false;
};

// Adds --kubeconfig and --allow-insecure-http.
void add_kube_options(CLI::App& command, KubeArgs& args);

// The credentials: the kubeconfig named (or $KUBECONFIG: one file; kubectl's
// list of files is refused with a message), else in-cluster.
[[nodiscard]] Result<kube::Credentials> kube_credentials(const std::string& kubeconfig);

// A client, or nullptr after printing why, prefixed with `command`.
std::unique_ptr<kube::Client> make_kube_client(const KubeArgs& args, const std::string& command,
                                               kube::ClientOptions options = {});

}  // namespace tessera::cli
