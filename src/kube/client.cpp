// The Kubernetes API client over cpp-httplib: one connection per request,
// retries with backoff, the eviction version learned once, node watches.
#include "kube/client.hpp"

#include <httplib.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/file_read.hpp"
#include "core/text.hpp"
#include "kube/tls.hpp"

namespace tessera::kube {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxTokenBytes = 1u << 20;
constexpr size_t kMaxErrorBody = 64u << 10;
constexpr size_t kMaxEventBytes = 16u << 20;  // one watch event (a Node is a few KiB)
constexpr size_t kMessageChars = 300;         // of a server's message, in our errors

// httplib adds the system's CA paths unless a CA file or directory is named
// (SSLClient::load_certs). A CA bundle from the credentials must be the only
// trust, as in client-go (rest.TLSClientConfig.CAData), so name a directory
// that can never hold a certificate.
constexpr const char* kNoCaDirectory = "/dev/null";

struct Endpoint {
  bool tls = false;
  std::string host;    // without brackets
  int port = 0;
  std::string prefix;  // a path before /api, without the trailing slash
};

Result<Endpoint> parse_server(const std::string& url, const std::string& source) {
  auto bad = [&](const std::string& why) {
    return fail(Errc::invalid_argument, "server " + quote(url) + " (" + source + "): " + why);
  };
  Endpoint ep;
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    ep.tls = true;
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    return bad("expected https://host[:port]");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) return bad("user information in the URL is not supported");
  if (path.find_first_of("?#") != std::string_view::npos) return bad("a query or fragment is not allowed");
  std::string_view port_text;
  if (authority.starts_with("[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 address without its closing ']'");
    ep.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("expected ':port' after the IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) return bad("an empty port");
    }
  } else {
    size_t colon = authority.find(':');
    if (colon != std::string_view::npos && authority.find(':', colon + 1) != std::string_view::npos) {
      return bad("an IPv6 address must be in brackets");
    }
    ep.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return bad("an empty port");
    }
  }
  if (ep.host.empty()) return bad("no host");
  ep.port = ep.tls ? 443 : 80;
  if (!port_text.empty()) {
    int port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535) {
      return bad("the port must be a number from 1 to 65535");
    }
    ep.port = port;
  }
  while (path.ends_with('/')) path.remove_suffix(1);
  ep.prefix = std::string(path);
  return ep;
}

// Percent-encodes everything but RFC 3986's unreserved characters.
std::string escape(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

// RFC 3339 in UTC, seconds: what metav1.Time serialises to.
std::string rfc3339_now() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

struct Call {
  std::string method;
  std::string path;  // with the query, without the server's prefix
  std::string body;
  std::string content_type;
  bool retry_429 = true;
};

// What one try of a request got.
struct Answer {
  int status = 0;  // 0: no answer
  std::string body;
  httplib::Headers headers;
  std::string failure;  // why no answer came (status 0)
  bool local = false;   // trying again will not help (no credentials, TLS setup, a certificate refused)
  long ms = 0;
};

// A Status object (kind Status) in a body, if that is what it holds.
const json* as_status(const json& body) {
  if (body.is_object() && body.contains("kind") && body["kind"] == "Status") return &body;
  return nullptr;
}

std::string string_at(const json& object, const char* key) {
  if (!object.is_object()) return {};
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool is_success(int status) { return status >= 200 && status < 300; }

std::string describe(const Call& call) { return call.method + " " + call.path; }

ApiError to_error(const Call& call, const Answer& a, int attempts) {
  ApiError e;
  e.status = a.status;
  std::string what;
  if (a.status == 0) {
    what = a.failure;
  } else {
    what = "HTTP " + std::to_string(a.status);
    json body = json::parse(a.body, nullptr, false);
    if (const json* status = as_status(body)) {
      e.reason = string_at(*status, "reason");
      std::string message = string_at(*status, "message");
      if (!e.reason.empty()) what += " " + excerpt(e.reason, 60);
      if (!message.empty()) what += ": " + excerpt(message, kMessageChars);
    } else if (!trim(a.body).empty()) {
      what += ": " + quote(trim(a.body), kMessageChars);
    }
  }
  e.message = describe(call) + ": " + what;
  if (attempts > 1) e.message += " (after " + std::to_string(attempts) + " attempts)";
  return e;
}

std::string summary(const Answer& a) {
  return a.status == 0 ? a.failure : "HTTP " + std::to_string(a.status);
}

bool retryable(const Call& call, const Answer& a) {
  if (a.local) return false;
  return a.status == 0 || a.status >= 500 || (a.status == 429 && call.retry_429);
}

// Retry-After in seconds (RFC 9110 also allows a date; the API server sends seconds).
std::optional<std::chrono::milliseconds> retry_after(const Answer& a) {
  auto it = a.headers.find("Retry-After");
  if (it == a.headers.end()) return std::nullopt;
  std::string text = trim(it->second);
  long seconds = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec != std::errc() || end != text.data() + text.size() || seconds < 0) return std::nullopt;
  return std::chrono::milliseconds(std::min<long>(seconds, 86400) * 1000);
}

std::chrono::milliseconds backoff(const ClientOptions& o, int attempt, const Answer& a) {
  using std::chrono::milliseconds;
  milliseconds cap = std::max(o.backoff_max, milliseconds(0));
  if ((a.status == 429 || a.status == 503)) {
    if (auto after = retry_after(a)) return std::min(*after, cap);
  }
  milliseconds base = std::max(o.backoff_initial, milliseconds(0));
  for (int i = 1; i < attempt && base < cap; ++i) base *= 2;
  base = std::min(base, cap);
  // Jitter: somewhere in the upper half, so that clients that failed together spread out.
  thread_local std::minstd_rand rng{std::random_device{}()};
  auto half = base.count() / 2;
  std::uniform_int_distribution<long long> pick(half, std::max<long long>(half, base.count()));
  return milliseconds(pick(rng));
}

struct FileStamp {
  long long mtime_sec = 0;
  long long mtime_nsec = 0;
  unsigned long long inode = 0;
  long long size = 0;
  bool operator==(const FileStamp&) const = default;
};

void ignore_sigpipe_by_default() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) != 0) return;
  if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
}

}  // namespace

namespace {
// One watch event's line as JSON, its object's fields filtered by `wanted` (all when empty).
json parse_event(std::string_view line, const FieldFilter& wanted);
}  // namespace

struct Client::Impl {
  Credentials creds;
  ClientOptions opts;
  Endpoint ep;
  std::vector<tls::X509Ptr> ca;
  tls::X509Ptr cert;
  tls::KeyPtr key;

  std::mutex token_mu;
  std::optional<FileStamp> token_stamp;
  std::string file_token;

  std::atomic<bool> eviction_v1beta1{false};

  std::mutex watch_mu;
  std::condition_variable watch_cv;
  std::atomic<bool> stopped{false};
  std::vector<httplib::ClientImpl*> watches;

  // The token to send ("" for none), or why there is none.
  expected<std::string, std::string> bearer_token();
  // A client for one request; nullptr and `why` when TLS cannot be set up.
  std::unique_ptr<httplib::ClientImpl> connect(std::chrono::milliseconds read_timeout, std::string& why,
                                              httplib::SSLClient** ssl_out);
  // Request headers, or an Answer saying why they could not be made.
  std::optional<Answer> headers_for(const Call& call, httplib::Headers& headers);
  std::string no_answer(httplib::Error err, httplib::SSLClient* ssl) const;
  Answer once(const Call& call);
  // Sends `call`, and again while its answer is retryable and attempts
  // remain, waiting a backoff between tries that stop() cuts short. Returns
  // the last answer; `attempt` is how many tries were made.
  Answer retrying(const Call& call, int& attempt);
  ApiResult<Answer> perform(const Call& call);
  ApiResult<json> perform_json(const Call& call);

  enum class WatchEnd { ended, no_stream, failed };
  WatchEnd watch_once(const Call& call, std::chrono::milliseconds read_timeout,
                      const std::function<bool(const WatchEvent&)>& on_event, const FieldFilter& wanted,
                      std::string& last, Answer& answer, ApiError& error);
  // Watches `query_start` (a path whose query goes on: it ends with '?' or '&') from `resource_version`.
  ApiResult<std::string> watch(const std::string& query_start, const std::string& resource_version, int timeout_seconds,
                               const std::function<bool(const WatchEvent&)>& on_event, const FieldFilter& wanted);
};

expected<std::string, std::string> Client::Impl::bearer_token() {
  if (creds.token_file.empty()) return creds.token;
  std::lock_guard lock(token_mu);
  struct stat st {};
  if (::stat(creds.token_file.c_str(), &st) != 0) {
    int err = errno;
    if (!file_token.empty()) {
      spdlog::warn("kube: token file {}: {}; using the token read before", creds.token_file, std::strerror(err));
      return file_token;
    }
    return unexpected(std::string("token file ") + creds.token_file + ": " + std::strerror(err));
  }
  FileStamp stamp{static_cast<long long>(st.st_mtim.tv_sec), static_cast<long long>(st.st_mtim.tv_nsec),
                  static_cast<unsigned long long>(st.st_ino), static_cast<long long>(st.st_size)};
  if (token_stamp && *token_stamp == stamp) return file_token;
  auto text = read_whole_file(creds.token_file, kMaxTokenBytes);
  std::string token = text ? trim(*text) : std::string();
  if (!text || token.empty()) {
    std::string why = text ? "the file is empty" : text.error().message;
    if (!file_token.empty()) {
      spdlog::warn("kube: token file {}: {}; using the token read before", creds.token_file, why);
      return file_token;
    }
    return unexpected("token file " + creds.token_file + ": " + why);
  }
  if (token_stamp) spdlog::debug("kube: token file {} changed; using its new token", creds.token_file);
  token_stamp = stamp;
  file_token = std::move(token);
  return file_token;
}

std::unique_ptr<httplib::ClientImpl> Client::Impl::connect(std::chrono::milliseconds read_timeout, std::string& why,
                                                           httplib::SSLClient** ssl_out) {
  std::unique_ptr<httplib::ClientImpl> client;
  if (ep.tls) {
    // SSL_CTX_use_certificate and SSL_CTX_use_PrivateKey take references of their own: cert and key stay ours.
    auto ssl = std::make_unique<httplib::SSLClient>(ep.host, ep.port, cert.get(), key.get());
    if (!ssl->is_valid()) {
      why = "cannot set up TLS: " + tls::take_errors();
      return nullptr;
    }
    if (creds.insecure_skip_verify) {
      ssl->enable_server_certificate_verification(false);
    } else if (!ca.empty()) {
      X509_STORE* store = X509_STORE_new();
      if (!store) {
        why = "cannot set up TLS: " + tls::take_errors();
        return nullptr;
      }
      for (const auto& c : ca) X509_STORE_add_cert(store, c.get());  // takes its own reference
      tls::take_errors();  // a certificate given twice is refused harmlessly
      // Ownership passes here: SSLClient::set_ca_cert_store hands the store to its
      // SSL_CTX (SSL_CTX_set_cert_store), which frees it with itself.
      ssl->set_ca_cert_store(store);
      ssl->set_ca_cert_path("", kNoCaDirectory);
    }
    if (ssl_out) *ssl_out = ssl.get();
    client = std::move(ssl);
  } else {
    client = std::make_unique<httplib::ClientImpl>(ep.host, ep.port);
  }
  client->set_connection_timeout(opts.request_timeout);
  client->set_write_timeout(opts.request_timeout);
  client->set_read_timeout(read_timeout);
  client->set_keep_alive(false);
  client->set_follow_location(false);
  client->set_url_encode(false);  // paths are escaped here
  return client;
}

std::optional<Answer> Client::Impl::headers_for(const Call& call, httplib::Headers& headers) {
  headers.emplace("Accept", "application/json");
  headers.emplace("User-Agent", opts.user_agent);
  if (!call.content_type.empty()) headers.emplace("Content-Type", call.content_type);
  auto token = bearer_token();
  if (!token) {
    Answer a;
    a.failure = token.error();
    a.local = true;
    return a;
  }
  if (!token->empty()) headers.emplace("Authorization", "Bearer " + *token);
  return std::nullopt;
}

// What httplib's error means; its own text (httplib::to_string) is the enum's name.
std::string error_text(httplib::Error err) {
  using E = httplib::Error;
  std::string what;
  switch (err) {
    case E::Connection: what = "could not connect"; break;
    case E::ConnectionTimeout: what = "connecting timed out"; break;
    case E::BindIPAddress: what = "could not bind the local address"; break;
    case E::Read: what = "the connection failed or timed out while reading the answer"; break;
    case E::Write: what = "the connection failed while sending the request"; break;
    case E::Canceled: what = "canceled"; break;
    case E::SSLConnection: what = "the TLS handshake failed"; break;
    case E::SSLLoadingCerts: what = "the CA certificates could not be loaded"; break;
    case E::SSLServerVerification: what = "the server's certificate was refused"; break;
    default: what = "failed"; break;
  }
  return what;
}

std::string Client::Impl::no_answer(httplib::Error err, httplib::SSLClient* ssl) const {
  std::string text = "no answer from " + creds.server + ": " + error_text(err);
  if (err == httplib::Error::SSLServerVerification && ssl) {
    long result = ssl->get_openssl_verify_result();
    if (result != X509_V_OK) {
      text += ": " + std::string(X509_verify_cert_error_string(result));
    } else {
      text += ": it does not name " + ep.host;
    }
  }
  return text + " (httplib: " + httplib::to_string(err) + ")";
}

Answer Client::Impl::once(const Call& call) {
  auto started = Clock::now();
  httplib::Request req;
  req.method = call.method;
  req.path = ep.prefix + call.path;
  req.body = call.body;
  if (auto failed = headers_for(call, req.headers)) return *failed;
  std::string why;
  httplib::SSLClient* ssl = nullptr;
  auto client = connect(opts.request_timeout, why, &ssl);
  Answer a;
  if (!client) {
    a.failure = why;
    a.local = true;
    return a;
  }
  httplib::Result result = client->send(req);
  a.ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  if (result) {
    a.status = result->status;
    a.body = std::move(result->body);
    a.headers = std::move(result->headers);
    spdlog::debug("kube: {} {} -> {} in {} ms", call.method, call.path, a.status, a.ms);
  } else {
    a.failure = no_answer(result.error(), ssl);
    // A certificate that does not verify now will not verify after a backoff either.
    a.local = result.error() == httplib::Error::SSLServerVerification;
    spdlog::debug("kube: {} {} -> {} after {} ms", call.method, call.path, a.failure, a.ms);
  }
  return a;
}

Answer Client::Impl::retrying(const Call& call, int& attempt) {
  const int attempts = std::max(1, opts.max_attempts);
  for (attempt = 1;; ++attempt) {
    Answer a = once(call);
    if (is_success(a.status) || attempt >= attempts || !retryable(call, a)) return a;
    auto delay = backoff(opts, attempt, a);
    spdlog::warn("kube: {}: {}; try {} of {} in {} ms", describe(call), summary(a), attempt + 1, attempts,
                 delay.count());
    std::unique_lock lock(watch_mu);
    if (watch_cv.wait_for(lock, delay, [&] { return stopped.load(); })) return a;
  }
}

ApiResult<Answer> Client::Impl::perform(const Call& call) {
  int attempt = 0;
  Answer a = retrying(call, attempt);
  if (is_success(a.status)) return a;
  return unexpected(to_error(call, a, attempt));
}

ApiResult<json> Client::Impl::perform_json(const Call& call) {
  auto answer = perform(call);
  if (!answer) return unexpected(answer.error());
  json body = json::parse(answer->body, nullptr, false);
  if (body.is_discarded()) {
    return unexpected(ApiError{answer->status, "", describe(call) + ": the answer is not JSON: " +
                                                       quote(answer->body, kMessageChars)});
  }
  return body;
}

Client::Impl::WatchEnd Client::Impl::watch_once(const Call& call, std::chrono::milliseconds read_timeout,
                                                const std::function<bool(const WatchEvent&)>& on_event,
                                                const FieldFilter& wanted, std::string& last, Answer& answer,
                                                ApiError& error) {
  auto started = Clock::now();
  httplib::Request req;
  req.method = call.method;
  req.path = ep.prefix + call.path;
  if (auto failed = headers_for(call, req.headers)) {
    answer = *failed;
    return WatchEnd::no_stream;
  }
  std::string why;
  httplib::SSLClient* ssl = nullptr;
  auto client = connect(read_timeout, why, &ssl);
  if (!client) {
    answer.failure = why;
    answer.local = true;
    return WatchEnd::no_stream;
  }
  {
    std::lock_guard lock(watch_mu);
    if (stopped) return WatchEnd::ended;
    watches.push_back(client.get());
  }

  int status = 0;
  std::string error_body;
  std::string buffer;
  bool failed = false;
  bool caller_done = false;

  // One line of the stream: a watch event. False ends the watch.
  auto handle_line = [&](std::string_view line) -> bool {
    if (trim(line).empty()) return true;
    json event = parse_event(line, wanted);
    if (!event.is_object() || !event.contains("type") || !event["type"].is_string()) {
      error = ApiError{0, "", describe(call) + ": a watch event that is not JSON: " + quote(line, kMessageChars)};
      failed = true;
      return false;
    }
    std::string type = event["type"].get<std::string>();
    json& object = event["object"];
    if (type == "ERROR") {
      // A Status; 410 Expired: the resourceVersion is older than the server keeps.
      // https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes
      int code = 500;
      if (object.is_object() && object.contains("code") && object["code"].is_number_integer()) {
        code = object["code"].get<int>();
      }
      std::string reason = string_at(object, "reason");
      if (code == 410) reason = "Expired";
      std::string message = string_at(object, "message");
      error = ApiError{code, reason,
                       describe(call) + ": ERROR event: " + std::to_string(code) +
                           (reason.empty() ? "" : " " + reason) +
                           (message.empty() ? "" : ": " + excerpt(message, kMessageChars))};
      failed = true;
      return false;
    }
    if (object.is_object() && object.contains("metadata")) {
      std::string rv = string_at(object["metadata"], "resourceVersion");
      if (!rv.empty()) last = rv;
    }
    WatchEvent watch_event{type, &object};
    if (!on_event(watch_event)) {
      caller_done = true;
      return false;
    }
    return !stopped;
  };

  req.response_handler = [&](const httplib::Response& response) {
    status = response.status;
    return !stopped;
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) -> bool {
    if (stopped) return false;
    if (!is_success(status)) {
      error_body.append(data, std::min(size, kMaxErrorBody - std::min(kMaxErrorBody, error_body.size())));
      return true;
    }
    buffer.append(data, size);
    size_t start = 0;
    for (size_t newline; (newline = buffer.find('\n', start)) != std::string::npos; start = newline + 1) {
      if (!handle_line(std::string_view(buffer).substr(start, newline - start))) return false;
    }
    buffer.erase(0, start);
    if (buffer.size() > kMaxEventBytes) {
      error = ApiError{0, "", describe(call) + ": a watch event larger than " + std::to_string(kMaxEventBytes) +
                                  " bytes"};
      failed = true;
      return false;
    }
    return true;
  };

  httplib::Result result = client->send(req);
  {
    std::lock_guard lock(watch_mu);
    std::erase(watches, client.get());
  }
  long ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  if (is_success(status) && !failed && !caller_done && !stopped && !buffer.empty()) handle_line(buffer);
  spdlog::debug("kube: {} {} -> {} ({}) after {} ms", call.method, call.path, status,
                result ? std::string("ended") : httplib::to_string(result.error()), ms);

  if (failed) return WatchEnd::failed;
  if (stopped || caller_done || is_success(status)) return WatchEnd::ended;
  answer.status = status;
  answer.body = std::move(error_body);
  answer.ms = ms;
  if (result) {
    answer.headers = result->headers;
  } else if (status == 0) {
    answer.failure = no_answer(result.error(), ssl);
    answer.local = result.error() == httplib::Error::SSLServerVerification;
  }
  return WatchEnd::no_stream;
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::create(Credentials credentials, ClientOptions options) {
  auto impl = std::make_unique<Impl>();
  std::string source = credentials.source.empty() ? std::string("the credentials") : credentials.source;
  auto ep = parse_server(credentials.server, source);
  if (!ep) return unexpected(ep.error());
  impl->ep = *ep;
  if (!credentials.ca_pem.empty()) {
    auto certs = tls::parse_certificates(credentials.ca_pem);
    if (!certs) return fail(certs.error().code, "CA bundle (" + source + "): " + certs.error().message);
    impl->ca = std::move(*certs);
  }
  if (credentials.client_cert_pem.empty() != credentials.client_key_pem.empty()) {
    return fail(Errc::invalid_argument, "client certificate and key (" + source + "): give both or neither");
  }
  if (!credentials.client_cert_pem.empty()) {
    auto certs = tls::parse_certificates(credentials.client_cert_pem);
    if (!certs) return fail(certs.error().code, "client certificate (" + source + "): " + certs.error().message);
    auto key = tls::parse_private_key(credentials.client_key_pem);
    if (!key) return fail(key.error().code, "client key (" + source + "): " + key.error().message);
    if (!tls::key_matches(certs->front().get(), key->get())) {
      return fail(Errc::invalid_argument, "client key (" + source + "): it does not belong to the client certificate");
    }
    impl->cert = std::move(certs->front());
    impl->key = std::move(*key);
  }
  const bool sends_token = !credentials.token.empty() || !credentials.token_file.empty();
  if (!ep->tls && (sends_token || !credentials.client_cert_pem.empty())) {
    const std::string what = sends_token ? "a bearer token" : "a client certificate";
    if (!options.allow_insecure_http) {
      return fail(Errc::invalid_argument, "server " + quote(credentials.server) + " (" + source + "): " + what +
                                              " would go over http:// in clear text; use https:// "
                                              "(--allow-insecure-http allows it, for tests only)");
    }
    static std::atomic<bool> warned{false};  // once per process, however many clients it makes
    if (!warned.exchange(true))
      spdlog::warn("kube: server {} ({}): {} goes over http:// in clear text (--allow-insecure-http); "
                   "never do this outside a test",
                   quote(credentials.server), source, what);
  }
  impl->creds = std::move(credentials);
  impl->opts = std::move(options);
  if (!impl->creds.token_file.empty()) {
    auto token = impl->bearer_token();
    if (!token) return fail(Errc::io, token.error() + " (" + source + ")");
  }
  ignore_sigpipe_by_default();
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

const Credentials& Client::credentials() const { return impl_->creds; }

ApiResult<json> Client::get_node(const std::string& name) {
  return impl_->perform_json(Call{"GET", "/api/v1/nodes/" + escape(name), "", "", true});
}

ApiResult<json> Client::patch_node_labels(const std::string& name,
                                          const std::map<std::string, std::optional<std::string>>& labels) {
  json patch_labels = json::object();
  for (const auto& [key, value] : labels) patch_labels[key] = value ? json(*value) : json(nullptr);
  json patch = {{"metadata", {{"labels", patch_labels}}}};
  // A JSON merge patch (RFC 7386): null removes a key. Patching the same labels twice gives the same Node.
  return impl_->perform_json(
      Call{"PATCH", "/api/v1/nodes/" + escape(name), patch.dump(), "application/merge-patch+json", true});
}

ApiResult<std::string> Client::watch_node(const std::string& name, const std::string& resource_version,
                                          const std::function<bool(const NodeEvent&)>& on_event,
                                          int timeout_seconds) {
  return impl_->watch("/api/v1/nodes?fieldSelector=" + escape("metadata.name=" + name) + "&", resource_version,
                      timeout_seconds, on_event, {});
}

ApiResult<std::string> Client::watch(const std::string& path, const std::string& resource_version,
                                     const std::function<bool(const WatchEvent&)>& on_event, int timeout_seconds,
                                     const FieldFilter& wanted) {
  return impl_->watch(path + "?", resource_version, timeout_seconds, on_event, wanted);
}

ApiResult<std::string> Client::Impl::watch(const std::string& query_start, const std::string& resource_version,
                                           int timeout_seconds, const std::function<bool(const WatchEvent&)>& on_event,
                                           const FieldFilter& wanted) {
  timeout_seconds = std::max(1, timeout_seconds);
  Call call{"GET",
            query_start + "watch=true&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(timeout_seconds) +
                (resource_version.empty() ? "" : "&resourceVersion=" + escape(resource_version)),
            "", "", true};
  // The server ends the watch after timeoutSeconds; reading waits that long and a request's time more.
  auto read_timeout = std::chrono::milliseconds(std::chrono::seconds(timeout_seconds)) + opts.request_timeout;
  std::string last = resource_version;
  int attempts = std::max(1, opts.max_attempts);
  for (int attempt = 1;; ++attempt) {
    Answer answer;
    ApiError error;
    switch (watch_once(call, read_timeout, on_event, wanted, last, answer, error)) {
      case WatchEnd::ended:
        return last;
      case WatchEnd::failed:
        return unexpected(error);
      case WatchEnd::no_stream:
        break;
    }
    if (attempt >= attempts || !retryable(call, answer)) return unexpected(to_error(call, answer, attempt));
    auto delay = backoff(opts, attempt, answer);
    spdlog::warn("kube: {}: {}; try {} of {} in {} ms", describe(call), summary(answer), attempt + 1, attempts,
                 delay.count());
    std::unique_lock lock(watch_mu);
    if (watch_cv.wait_for(lock, delay, [&] { return stopped.load(); })) return last;
  }
}

void Client::stop() {
  std::lock_guard lock(impl_->watch_mu);
  impl_->stopped = true;
  impl_->watch_cv.notify_all();
  // Shuts the socket of each watch in flight (httplib: "the ONLY thread-safe thing we can do").
  for (httplib::ClientImpl* watch : impl_->watches) watch->stop();
}

ApiResult<std::vector<json>> Client::list_pods_on_node(const std::string& node) {
  auto list = impl_->perform_json(
      Call{"GET", "/api/v1/pods?fieldSelector=" + escape("spec.nodeName=" + node), "", "", true});
  if (!list) return unexpected(list.error());
  std::vector<json> pods;
  if (list->is_object() && list->contains("items") && (*list)["items"].is_array()) {
    for (auto& item : (*list)["items"]) pods.push_back(std::move(item));
  }
  return pods;
}

ApiResult<json> Client::get_pod(const std::string& pod_namespace, const std::string& name) {
  return impl_->perform_json(
      Call{"GET", "/api/v1/namespaces/" + escape(pod_namespace) + "/pods/" + escape(name), "", "", true});
}

namespace {

// The pod itself is gone: 404 with a Status about a pod (details.kind "pods").
bool pod_not_found(const std::string& body) {
  json parsed = json::parse(body, nullptr, false);
  const json* status = as_status(parsed);
  if (!status) return false;
  auto details = status->find("details");
  return details != status->end() && string_at(*details, "kind") == "pods";
}

// A server before 1.22 does not know policy/v1 Eviction: it answers 404 (no
// such resource, not a missing pod) or 400 ("no kind "Eviction" is registered
// for version "policy/v1"").
bool version_refused(int status, const std::string& body) {
  if (status == 404) return !pod_not_found(body);
  if (status != 400) return false;
  json parsed = json::parse(body, nullptr, false);
  const json* s = as_status(parsed);
  std::string message = s ? string_at(*s, "message") : body;
  return message.find("policy/v1") != std::string::npos &&
         (message.find("version") != std::string::npos || message.find("kind") != std::string::npos);
}

}  // namespace

ApiResult<EvictionResult> Client::evict_pod(const std::string& pod_namespace, const std::string& name,
                                            std::optional<int64_t> grace_period_seconds) {
  Impl& m = *impl_;
  // policy/v1 Eviction is served from 1.22; before, policy/v1beta1.
  // https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/
  bool v1beta1 = m.eviction_v1beta1.load();
  for (;;) {
    json delete_options = json::object();
    if (grace_period_seconds) delete_options["gracePeriodSeconds"] = *grace_period_seconds;
    json body = {{"apiVersion", v1beta1 ? "policy/v1beta1" : "policy/v1"},
                 {"kind", "Eviction"},
                 {"metadata", {{"name", name}, {"namespace", pod_namespace}}},
                 {"deleteOptions", delete_options}};
    // 429 is the answer, not a reason to try again: a PodDisruptionBudget allows no disruption now.
    Call call{"POST", "/api/v1/namespaces/" + escape(pod_namespace) + "/pods/" + escape(name) + "/eviction",
              body.dump(), "application/json", false};
    int attempt = 0;
    Answer a = m.retrying(call, attempt);
    bool known_version = !version_refused(a.status, a.body);
    if (v1beta1 && known_version && !m.eviction_v1beta1.exchange(true)) {
      spdlog::info("kube: the API server serves Eviction only as policy/v1beta1; using that from now on");
    }
    if (is_success(a.status)) return EvictionResult::evicted;
    if (a.status == 429) return EvictionResult::blocked;
    if (a.status == 404 && pod_not_found(a.body)) return EvictionResult::gone;
    if (!v1beta1 && !known_version) {
      spdlog::debug("kube: {} refused policy/v1 (HTTP {}); trying policy/v1beta1", describe(call), a.status);
      v1beta1 = true;
      continue;
    }
    return unexpected(to_error(call, a, attempt));
  }
}

ApiResult<void> Client::create_node_event(const std::string& node, const std::string& node_uid,
                                          const std::string& type, const std::string& reason,
                                          const std::string& message) {
  std::string now = rfc3339_now();
  // Node events live in "default", as the kubelet's do (a Node has no namespace).
  json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", node + "."}, {"namespace", "default"}}},
      {"involvedObject", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", node_uid}}},
      {"reason", reason},
      {"message", message},
      {"type", type},
      {"source", {{"component", "tessera"}, {"host", node}}},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1},
  };
  auto answer = impl_->perform(
      Call{"POST", "/api/v1/namespaces/default/events", event.dump(), "application/json", true});
  if (!answer) return unexpected(answer.error());
  return {};
}

std::string escape_path_segment(std::string_view text) { return escape(text); }

namespace {

// nlohmann's SAX events turned into a DOM of the fields `wanted` accepts; a refused field's value,
// however deep, is scanned and never built. The path handed to `wanted` holds one key per open
// object from the item down (an array adds none).
class FilteredDom {
 public:
  using string_t = json::string_t;
  // The item's fields are filtered: inside the root's `container` key, `depth` containers down
  // (a List's items: "items", 3: the List, its array, the item; a watch event's object:
  // "object", 2).
  FilteredDom(json& root, const FieldFilter& wanted, const char* container = "items", size_t depth = 3)
      : root_(root), wanted_(wanted), container_(container), depth_(depth) {}

  bool null() { return value(nullptr); }
  bool boolean(bool v) { return value(v); }
  bool number_integer(json::number_integer_t v) { return value(v); }
  bool number_unsigned(json::number_unsigned_t v) { return value(v); }
  bool number_float(json::number_float_t v, const string_t&) { return value(v); }
  bool string(string_t& v) { return value(std::move(v)); }
  bool binary(json::binary_t& v) { return value(std::move(v)); }
  bool start_object(std::size_t) {
    if (!open(json::object())) return true;
    keys_.emplace_back();
    objects_.push_back(true);
    return true;
  }
  bool start_array(std::size_t) {
    if (open(json::array())) objects_.push_back(false);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(string_t& k) {
    if (skipping_ > 0) return true;
    keys_.back() = k;
    // Inside an item: the List object, its items array and the item are open.
    if (stack_.size() >= depth_ && keys_.front() == container_ && !wanted_(std::span<const std::string>(keys_).subspan(1))) {
      skip_next_ = true;
      return true;
    }
    slot_ = &(*stack_.back())[k];
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

 private:
  // Where the next value goes: the root, the open array's end, or the key's slot.
  json* place(json&& v) {
    if (stack_.empty()) return &(root_ = std::move(v));
    if (!objects_.back()) {
      stack_.back()->push_back(std::move(v));
      return &stack_.back()->back();
    }
    return &(*slot_ = std::move(v));
  }
  template <typename T>
  bool value(T&& v) {
    if (skipping_ > 0) return true;
    if (skip_next_) {
      skip_next_ = false;
      return true;
    }
    place(json(std::forward<T>(v)));
    return true;
  }
  // A container starts: false when it is skipped.
  bool open(json&& empty) {
    if (skipping_ > 0 || skip_next_) {
      skip_next_ = false;
      ++skipping_;
      return false;
    }
    stack_.push_back(place(std::move(empty)));
    return true;
  }
  bool close() {
    if (skipping_ > 0) {
      --skipping_;
      return true;
    }
    if (objects_.back()) keys_.pop_back();
    objects_.pop_back();
    stack_.pop_back();
    return true;
  }

  json& root_;
  const FieldFilter& wanted_;
  const char* container_;
  size_t depth_;
  std::vector<json*> stack_;       // the open containers being built
  std::vector<bool> objects_;      // whether each is an object
  std::vector<std::string> keys_;  // each open object's current key
  json* slot_ = nullptr;           // the current key's value in the innermost object
  bool skip_next_ = false;         // the current key's value is not wanted
  int skipping_ = 0;               // containers open inside a value not wanted
};

}  // namespace

json parse_list(std::string_view text, const FieldFilter& wanted) {
  if (!wanted) return json::parse(text, nullptr, false);
  json root;
  FilteredDom dom(root, wanted);
  if (!json::sax_parse(text, &dom, json::input_format_t::json)) return json(json::value_t::discarded);
  return root;
}

namespace {

json parse_event(std::string_view line, const FieldFilter& wanted) {
  if (!wanted) return json::parse(line, nullptr, false);
  // The resume needs the object's resourceVersion, whatever the caller keeps.
  FieldFilter keep_version = [&wanted](std::span<const std::string> path) {
    return (path.size() == 2 && path[0] == "metadata" && path[1] == "resourceVersion") || wanted(path);
  };
  json root;
  FilteredDom dom(root, keep_version, "object", 2);
  if (!json::sax_parse(line, &dom, json::input_format_t::json)) return json(json::value_t::discarded);
  return root;
}

// A successful answer's body as JSON (null when empty).
ApiResult<json> answer_json(const Call& call, const Answer& a, const FieldFilter& wanted = {}) {
  if (trim(a.body).empty()) return json(nullptr);
  json parsed = parse_list(a.body, wanted);
  if (parsed.is_discarded())
    return unexpected(ApiError{a.status, "", describe(call) + ": the answer is not JSON: " + quote(a.body, kMessageChars)});
  return parsed;
}

}  // namespace

ApiResult<json> Client::request(const std::string& method, const std::string& path, const std::string& body,
                                const std::string& content_type, bool retry_post) {
  Call call{method, path, body, body.empty() ? std::string() : content_type, true};
  if (method == "POST" && !retry_post) {
    // Once: a create that reached the server must not be sent again.
    Answer a = impl_->once(call);
    if (!is_success(a.status)) return unexpected(to_error(call, a, 1));
    return answer_json(call, a);
  }
  auto answer = impl_->perform(call);
  if (!answer) return unexpected(answer.error());
  return answer_json(call, *answer);
}

ApiResult<json> Client::list_nodes() { return request("GET", "/api/v1/nodes"); }

ApiResult<json> Client::list_pods() { return request("GET", "/api/v1/pods"); }

ApiResult<json> Client::list_all(const std::string& path, const std::string& kind, const std::string& api_version,
                                 const std::function<bool(json&)>& keep, size_t page, const FieldFilter& wanted) {
  json items = json::array();
  std::string token, version;
  int restarts = 0;
  for (;;) {
    if (impl_->stopped) return unexpected(ApiError{0, "", "GET " + path + ": stopped"});
    std::string url = path + "?limit=" + std::to_string(std::max<size_t>(1, page));
    if (!token.empty()) url += "&continue=" + escape(token);
    const Call call{"GET", url, {}, {}, true};
    auto answer = impl_->perform(call);
    auto list = answer ? answer_json(call, *answer, wanted) : ApiResult<json>(unexpected(answer.error()));
    if (!list && list.error().status == 410 && restarts < 3) {
      // The continue token expired (the list took longer than the server keeps it): from the start.
      ++restarts;
      items = json::array();
      token.clear();
      continue;
    }
    if (!list) return unexpected(list.error());
    if (list->is_object() && list->contains("items") && (*list)["items"].is_array())
      for (auto& item : (*list)["items"]) {
        // A typed list's items carry no kind; kubectl's List has it on each.
        if (item.is_object()) {
          if (!item.contains("kind")) item["kind"] = kind;
          if (!item.contains("apiVersion")) item["apiVersion"] = api_version;
        }
        if (!keep || keep(item)) items.push_back(std::move(item));
      }
    const json* meta = list->is_object() && list->contains("metadata") ? &(*list)["metadata"] : nullptr;
    // Every page of a list is read at its first page's resourceVersion.
    if (token.empty() && meta) version = string_at(*meta, "resourceVersion");
    token = meta ? string_at(*meta, "continue") : std::string();
    if (token.empty()) break;
  }
  return json{{"apiVersion", "v1"}, {"kind", "List"}, {"metadata", {{"resourceVersion", version}}}, {"items", std::move(items)}};
}

ApiResult<json> Client::get_configmap(const std::string& ns, const std::string& name) {
  return request("GET", "/api/v1/namespaces/" + escape(ns) + "/configmaps/" + escape(name));
}

ApiResult<json> Client::create_configmap(const std::string& ns, const json& configmap) {
  json body = configmap;
  body["apiVersion"] = "v1";
  body["kind"] = "ConfigMap";
  return request("POST", "/api/v1/namespaces/" + escape(ns) + "/configmaps", body.dump());
}

ApiResult<json> Client::update_configmap(const std::string& ns, const json& configmap) {
  json body = configmap;
  body["apiVersion"] = "v1";
  body["kind"] = "ConfigMap";
  std::string name = body.contains("metadata") ? string_at(body["metadata"], "name") : std::string();
  return request("PUT", "/api/v1/namespaces/" + escape(ns) + "/configmaps/" + escape(name), body.dump());
}

ApiResult<json> Client::patch_configmap(const std::string& ns, const std::string& name, const json& merge_patch) {
  return request("PATCH", "/api/v1/namespaces/" + escape(ns) + "/configmaps/" + escape(name), merge_patch.dump(),
                 "application/merge-patch+json");
}

ApiResult<void> Client::create_event(const std::string& ns, const json& involved, const std::string& type,
                                     const std::string& reason, const std::string& message, const std::string& component) {
  std::string now = rfc3339_now();
  std::string name = involved.is_object() ? string_at(involved, "name") : std::string();
  json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", (name.empty() ? std::string("tessera") : name) + "."}, {"namespace", ns}}},
      {"involvedObject", involved},
      {"reason", reason},
      {"message", message},
      {"type", type},
      {"source", {{"component", component}}},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1},
  };
  auto answer = request("POST", "/api/v1/namespaces/" + escape(ns) + "/events", event.dump());
  if (!answer) return unexpected(answer.error());
  return {};
}

}  // namespace tessera::kube
