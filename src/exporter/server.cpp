#include "exporter/server.hpp"

#include <arpa/inet.h>
#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "core/text.hpp"
#include "exporter/render.hpp"

namespace tessera::exporter {

class Server::Impl {
 public:
  httplib::Server http;
};

namespace {

// Why a bind to host:port fails, asked of the system directly: cpp-httplib
// only says that it failed.
std::string bind_problem(const ListenAddress& a) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port = std::to_string(a.port);
  if (int rc = getaddrinfo(a.host.empty() ? nullptr : a.host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return gai_strerror(rc);
  std::string why = "unknown reason";
  for (auto* ai = found; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    int rc = ::bind(fd, ai->ai_addr, ai->ai_addrlen);
    int err = errno;
    close(fd);
    if (rc != 0) {
      why = err == EADDRINUSE ? "the port is in use" : std::strerror(err);
      break;
    }
  }
  freeaddrinfo(found);
  return why;
}

}  // namespace

Result<ListenAddress> parse_listen(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos)
    return fail(Errc::invalid_argument, quote(text) + ": expected HOST:PORT, e.g. 127.0.0.1:9400");
  ListenAddress out;
  out.host = text.substr(0, colon);
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  std::string port = text.substr(colon + 1);
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), out.port);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || out.port < 0 || out.port > 65535)
    return fail(Errc::invalid_argument, quote(text) + ": the port must be a number from 0 to 65535");
  if (out.host.empty()) out.host = "0.0.0.0";
  return out;
}

Server::Server(std::unique_ptr<Impl> impl, int port) : impl_(std::move(impl)), port_(port) {}

Server::~Server() { stop(); }

Result<std::unique_ptr<Server>> Server::bind(const ListenAddress& address, const Sampler& sampler,
                                             std::chrono::milliseconds stale_after) {
  auto impl = std::make_unique<Impl>();
  auto& http = impl->http;
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, which would let a
  // second exporter share the port instead of being told it is taken.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // Two workers: scrapes are copies of a prepared text.
  http.new_task_queue = [] { return new httplib::ThreadPool(2); };
  http.Get("/metrics", [&sampler](const httplib::Request&, httplib::Response& res) {
    auto text = sampler.text();
    if (!text) {
      res.status = 503;
      res.set_content("no sample yet\n", "text/plain");
      return;
    }
    // The text is immutable once published: hand it out without copying.
    res.set_content_provider(
        text->size(), kContentType,
        [text](size_t offset, size_t length, httplib::DataSink& sink) {
          return sink.write(text->data() + offset, length);
        });
  });
  http.Get("/healthz", [&sampler, stale_after](const httplib::Request&, httplib::Response& res) {
    auto sample = sampler.sample();
    if (!sample || sample->last_success_unix <= 0) {
      res.status = 503;
      res.set_content("no complete sample yet\n", "text/plain");
      return;
    }
    double age = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
                 sample->last_success_unix;
    if (age > std::chrono::duration<double>(stale_after).count()) {
      res.status = 503;
      res.set_content("the last complete sample is " + std::to_string(static_cast<long>(age)) + " s old\n",
                      "text/plain");
      return;
    }
    res.set_content("ok\n", "text/plain");
  });
  int port = address.port;
  if (port == 0) {
    port = http.bind_to_any_port(address.host);
    if (port < 0) port = 0;
  } else if (!http.bind_to_port(address.host, port)) {
    port = 0;
  }
  if (port == 0)
    return fail(Errc::conflict, "cannot listen on " + address.host + ":" + std::to_string(address.port) + ": " +
                                    bind_problem(address));
  return std::unique_ptr<Server>(new Server(std::move(impl), port));
}

void Server::run() { impl_->http.listen_after_bind(); }

bool Server::running() const { return impl_->http.is_running(); }

void Server::stop() {
  if (impl_) impl_->http.stop();
}

Result<std::unique_ptr<Service>> Service::start(nvml::Session session, SamplerOptions options,
                                                const ListenAddress& address) {
  std::unique_ptr<Service> service(new Service());
  auto stale_after = 3 * options.interval + options.gpm_window + options.pod_resources_timeout;
  service->sampler_ = std::make_unique<Sampler>(std::move(session), std::move(options));
  auto server = Server::bind(address, *service->sampler_, stale_after);
  if (!server) return unexpected(server.error());
  service->server_ = std::move(*server);
  service->sampler_->sample_once();  // the first sample before the first scrape
  service->sampler_->start(false);
  service->http_ = std::thread([s = service->server_.get()] { s->run(); });
  for (int i = 0; i < 500 && !service->server_->running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return service;
}

class TextEndpoint::Impl {
 public:
  httplib::Server http;
};

TextEndpoint::TextEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<TextEndpoint>> TextEndpoint::start(const ListenAddress& address,
                                                          std::function<std::string()> render,
                                                          std::function<std::string()> problem) {
  auto impl = std::make_unique<Impl>();
  impl->http.Get("/metrics", [render = std::move(render)](const httplib::Request&, httplib::Response& res) {
    res.set_content(render(), kContentType);
  });
  impl->http.Get("/healthz", [problem = std::move(problem)](const httplib::Request&, httplib::Response& res) {
    const std::string why = problem ? problem() : std::string();
    res.status = why.empty() ? 200 : 503;
    res.set_content(why.empty() ? "ok\n" : why + "\n", "text/plain");
  });
  if (!impl->http.bind_to_port(address.host, address.port))
    return fail(Errc::conflict, "cannot listen on " + address.host + ":" + std::to_string(address.port) + ": " +
                                    bind_problem(address));
  std::unique_ptr<TextEndpoint> endpoint(new TextEndpoint(std::move(impl)));
  endpoint->http_ = std::thread([http = &endpoint->impl_->http] { http->listen_after_bind(); });
  return endpoint;
}

TextEndpoint::~TextEndpoint() { stop(); }

void TextEndpoint::stop() {
  if (impl_) impl_->http.stop();
  if (http_.joinable()) http_.join();
}

Service::~Service() { stop(); }

void Service::stop() {
  if (server_) server_->stop();
  if (http_.joinable()) http_.join();
  if (sampler_) sampler_->stop();
}

}  // namespace tessera::exporter
