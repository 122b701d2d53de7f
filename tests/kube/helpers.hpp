// Small helpers the kube test files share.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "kube/client.hpp"
#include "kube/fake_apiserver.hpp"

namespace tessera::kube::testing {

// Short timeouts and backoff, so that retries take milliseconds.
inline ClientOptions fast_options() {
  using namespace std::chrono_literals;
  ClientOptions o;
  o.request_timeout = 2000ms;
  o.max_attempts = 3;
  o.backoff_initial = 10ms;
  o.backoff_max = 40ms;
  o.user_agent = "tessera-test";
  return o;
}

// The fake server speaks plain HTTP unless a test gives it TLS: tests that
// send a token to it say so.
inline ClientOptions insecure_http(ClientOptions o = fast_options()) {
  o.allow_insecure_http = true;
  return o;
}

inline std::unique_ptr<Client> must_create(Credentials credentials, ClientOptions options = fast_options()) {
  auto client = Client::create(std::move(credentials), options);
  EXPECT_TRUE(client.has_value()) << client.error().message;
  return client ? std::move(*client) : nullptr;
}

inline std::unique_ptr<Client> client_for(const FakeApiServer& server, ClientOptions options = fast_options()) {
  Credentials c;
  c.server = server.url();
  c.source = "test";
  return must_create(c, options);
}

inline std::string base64(const std::string& data) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(data[i]) << 16) | (static_cast<unsigned char>(data[i + 1]) << 8) |
                 static_cast<unsigned char>(data[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(alphabet[(v >> s) & 63]);
  }
  if (i + 1 == data.size()) {
    unsigned v = static_cast<unsigned char>(data[i]) << 16;
    out += {alphabet[(v >> 18) & 63], alphabet[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == data.size()) {
    unsigned v = (static_cast<unsigned char>(data[i]) << 16) | (static_cast<unsigned char>(data[i + 1]) << 8);
    out += {alphabet[(v >> 18) & 63], alphabet[(v >> 12) & 63], alphabet[(v >> 6) & 63], '='};
  }
  return out;
}

}  // namespace tessera::kube::testing
