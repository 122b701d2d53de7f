// The exporter's HTTP endpoint (cpp-httplib): GET /metrics answers the
// sampler's last rendered sample, GET /healthz says whether samples are
// recent. Neither calls NVML.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "exporter/sampler.hpp"

namespace tessera::exporter {

// "127.0.0.1:9400", "[::1]:9400", ":9400" (every address) -> host and port;
// errors name what is wrong.
struct ListenAddress {
  std::string host;
  int port = 0;
};
[[nodiscard]] Result<ListenAddress> parse_listen(const std::string& text);

class Server {
 public:
  // Binds now, so a port in use is an error here (Errc::conflict, naming the
  // address and the system's reason). `stale_after`: /healthz fails once the
  // last complete sample is older than this.
  [[nodiscard]] static Result<std::unique_ptr<Server>> bind(const ListenAddress& address, const Sampler& sampler,
                                                            std::chrono::milliseconds stale_after);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return port_; }
  // Serves until stop(); returns at once after stop.
  void run();
  bool running() const;
  void stop();

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_;
};

// The sampler and its server running, each on its own thread: what
// `tessera exporter` serves and `tessera node --metrics-listen` runs beside
// the plugin. /healthz fails after three intervals without a complete sample.
class Service {
 public:
  // Takes the first sample, then starts sampling and serving. Errors: the
  // address cannot be bound (as Server::bind).
  [[nodiscard]] static Result<std::unique_ptr<Service>> start(nvml::Session session, SamplerOptions options,
                                                              const ListenAddress& address);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;
  int port() const { return server_->port(); }
  // Stops serving, then sampling (also on destruction).
  void stop();

 private:
  Service() = default;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Server> server_;
  std::thread http_;
};

// GET /metrics answering `render()` (called at each scrape) and GET /healthz
// answering "ok", or 503 with what `problem()` says when it says something,
// on a thread of its own: for a process that renders its own metrics when
// asked (`tessera dra`, `tessera fleet run`). Binds at once, so a port in use
// is an error here, worded as Server::bind words it.
class TextEndpoint {
 public:
  [[nodiscard]] static Result<std::unique_ptr<TextEndpoint>> start(const ListenAddress& address,
                                                                   std::function<std::string()> render,
                                                                   std::function<std::string()> problem = {});
  ~TextEndpoint();  // stops
  TextEndpoint(const TextEndpoint&) = delete;
  TextEndpoint& operator=(const TextEndpoint&) = delete;
  void stop();

  class Impl;

 private:
  explicit TextEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::thread http_;
};

}  // namespace tessera::exporter
