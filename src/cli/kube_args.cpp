#include "cli/kube_args.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "core/text.hpp"

namespace tessera::cli {

void add_kube_options(CLI::App& command, KubeArgs& args) {
  command.add_option("--kubeconfig", args.kubeconfig,
                     "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the pod's service account)");
  command.add_flag("--allow-insecure-http", args.allow_insecure_http,
                   "Send the token to an http:// API server in clear text (tests only; warned at every start)");
}

Result<kube::Credentials> kube_credentials(const std::string& kubeconfig) {
  std::string file = kubeconfig;
  if (file.empty())
    if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
      file = env;
      // kubectl merges a list of files; tessera reads one.
      if (file.find(':') != std::string::npos)
        return fail(Errc::invalid_argument, "KUBECONFIG names several files (" + quote(file) +
                                                "); tessera reads one: pass --kubeconfig FILE");
    }
  if (!file.empty()) return kube::from_kubeconfig(file);
  // As kubectl: ~/.kube/config where it exists, then the pod's service account.
  std::error_code ec;
  if (const char* home = std::getenv("HOME"); home && *home)
    if (const std::string config = std::string(home) + "/.kube/config"; std::filesystem::is_regular_file(config, ec))
      return kube::from_kubeconfig(config);
  auto pod = kube::in_cluster();
  if (!pod && pod.error().code == Errc::not_found)
    return fail(Errc::not_found, "no Kubernetes credentials: pass --kubeconfig FILE, set KUBECONFIG, or create "
                                 "~/.kube/config (" + pod.error().message + ")");
  return pod;
}

std::unique_ptr<kube::Client> make_kube_client(const KubeArgs& args, const std::string& command,
                                               kube::ClientOptions options) {
  auto creds = kube_credentials(args.kubeconfig);
  if (!creds) {
    std::cerr << command << ": " << creds.error().message << '\n';
    return nullptr;
  }
  options.allow_insecure_http = args.allow_insecure_http;
  auto client = kube::Client::create(*creds, options);
  if (!client) {
    std::cerr << command << ": " << client.error().message << '\n';
    return nullptr;
  }
  spdlog::info("talking to {} ({})", creds->server, creds->source);
  return std::move(*client);
}

}  // namespace tessera::cli
