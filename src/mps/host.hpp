// `tessera mps-host` and its clients (docs/design-mps.md, "Daemons that
// outlive the agent"). The host owns a node's MPS control daemons (a
// Supervisor: they are its children) and serves a unix socket on a host path
// tenants never see. Over it, one JSON document per line:
//   client -> host  {"want": [{"uuid", "resource", "pipe", "log",
//                    "pinned_mem_limit_mib", "active_thread_percentage"}, ...]}
//                   the daemons the client wants from now on;
//   host -> client  {"daemons": [{...the spec..., "up", "pid", "since",
//                    "failures", "retry_in_ms", "error", "limits", "clients",
//                    "note"}, ...]}
//                   every daemon's state, sent when a client connects and
//                   whenever any of it changes (no polling);
//                   {"error": "..."} for a request it could not read.
// A client that goes away leaves the daemons running: the next one to
// connect sees them in the first document and adopts them. Only a `want`
// changes the set; the first `want` of each connection has the daemons it
// keeps read back (limits, clients). Clients must run as the host's user (or
// root): the socket is checked with SO_PEERCRED.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "mps/daemons.hpp"
#include "mps/supervisor.hpp"

namespace tessera::mps {

// The socket's default place: beside the driver's run directory, not under
// mpsRoot (whose pipe directories are mounted into tenants).
inline constexpr const char* kDefaultHostSocket = "/run/nvidia/tessera/mps-host.sock";

std::string encode_want(const std::vector<DaemonSpec>& wanted);
std::string encode_status(const std::vector<DaemonStatus>& status);
[[nodiscard]] Result<std::vector<DaemonSpec>> decode_want(const std::string& line);
[[nodiscard]] Result<std::vector<DaemonStatus>> decode_status(const std::string& line);

struct HostOptions {
  std::string socket = kDefaultHostSocket;
  SupervisorOptions supervisor;
};

class HostServer {
 public:
  // Makes the socket's directory (mode 0700), refuses a socket there that a
  // live host answers on, binds (mode 0600) and serves on a thread of its own.
  [[nodiscard]] static Result<std::unique_ptr<HostServer>> start(HostOptions options);
  ~HostServer();  // stop()
  HostServer(const HostServer&) = delete;
  HostServer& operator=(const HostServer&) = delete;

  // Stops serving (the socket removed) and every daemon. Idempotent.
  void stop();
  Supervisor& supervisor() { return supervisor_; }
  const std::string& socket() const { return options_.socket; }
  size_t connections() const;

 private:
  explicit HostServer(HostOptions options);
  void run();
  struct Connection;

  HostOptions options_;
  Supervisor supervisor_;
  Notifier stop_;
  int listen_fd_ = -1;
  std::thread thread_;
  mutable std::mutex mutex_;
  size_t connections_ = 0;
  bool stopped_ = false;
};

// The plugin's side: the daemons of the `tessera mps-host` at `socket`.
// Connects on a thread of its own and again whenever the connection is lost
// (backoff from 100 ms to 2 s); while there is none every wanted daemon is
// down, with the reason.
class HostClient final : public Daemons {
 public:
  explicit HostClient(std::string socket);
  ~HostClient() override;  // shutdown()
  HostClient(const HostClient&) = delete;
  HostClient& operator=(const HostClient&) = delete;

  void want(std::vector<DaemonSpec> wanted) override;
  std::vector<DaemonStatus> status() const override;
  std::set<std::string> up() const override;
  int changed_fd() const override { return changed_.fd(); }
  void drain() override { changed_.drain(); }
  // Disconnects; the host keeps the daemons. Idempotent.
  void shutdown() override;
  std::string where() const override { return "tessera mps-host at " + socket_; }
  bool connected() const;

 private:
  void run();
  void apply(std::vector<DaemonStatus> daemons, bool first);
  void lost(const std::string& why);

  std::string socket_;
  Notifier changed_, wake_;
  mutable std::mutex mutex_;
  std::optional<std::vector<DaemonSpec>> wanted_;
  bool want_unsent_ = false;
  bool stopping_ = false;
  bool connected_ = false;
  std::string unreachable_;                      // why there is no connection
  std::map<std::string, DaemonStatus> host_;     // the host's last document, by device
  // run()'s thread only: the daemons up in this connection's first document
  // (device -> pid: adopted), and the devices the log has named as up.
  std::map<std::string, int> initial_;
  std::set<std::string> reported_;
  std::thread thread_;
};

}  // namespace tessera::mps
