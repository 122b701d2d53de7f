#include "state.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace tessera_mps_sim {
namespace {

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

std::optional<long> parse_long(const std::string& s) {
  if (!all_digits(s) || s.size() > 9) return std::nullopt;
  return std::strtol(s.c_str(), nullptr, 10);
}

// "<number>" with an optional fraction, in (0, 100].
std::optional<double> parse_percentage(const std::string& s) {
  if (s.empty() || s.size() > 16) return std::nullopt;
  bool dot = false, digit = false;
  for (char c : s) {
    if (c == '.' && !dot) dot = true;
    else if (c >= '0' && c <= '9') digit = true;
    else return std::nullopt;
  }
  if (!digit) return std::nullopt;
  double v = std::strtod(s.c_str(), nullptr);
  if (!(v > 0.0 && v <= 100.0)) return std::nullopt;
  return v;
}


// A device as the real commands take it: an index among the daemon's visible
// devices, or a GPU/MIG UUID (a prefix of one, as CUDA_VISIBLE_DEVICES allows).
// Returns an error text, empty when the device is acceptable.
std::string check_device(const State& state, const std::string& dev) {
  bool uuid = dev.rfind("GPU-", 0) == 0 || dev.rfind("MIG-", 0) == 0;
  if (!uuid && !all_digits(dev)) return "Invalid device " + dev;
  if (state.visible.empty()) return "";  // nothing known about the node: any index or UUID
  if (uuid) {
    for (const auto& v : state.visible)
      if (v.rfind(dev, 0) == 0 || dev.rfind(v, 0) == 0) return "";
    return "Invalid device " + dev + ": not among CUDA_VISIBLE_DEVICES";
  }
  auto index = parse_long(dev);
  if (!index || *index >= static_cast<long>(state.visible.size()))
    return "Invalid device " + dev + ": " + std::to_string(state.visible.size()) + " visible device(s)";
  return "";
}

std::string escape(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// A server named by its pid, as the per-server commands take it; null (and
// `error` set) when there is none.
Server* find_server(State& state, const std::string& pid, std::string& error) {
  auto n = parse_long(pid);
  if (n)
    for (auto& s : state.servers)
      if (s.pid == *n) return &s;
  error = "Invalid server PID " + pid + ": no such MPS server";
  return nullptr;
}

}  // namespace

std::string one_decimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

Client client_limits(const Server& server, const std::string& threads, const std::string& pinned) {
  Client c;
  c.server = server.pid;
  c.thread_percentage = server.thread_percentage;
  if (auto p = parse_percentage(threads); p && *p < c.thread_percentage) c.thread_percentage = *p;
  c.pinned_mem_limits = server.pinned_mem_limits;
  std::stringstream in(pinned);
  for (std::string item; std::getline(in, item, ',');) {
    auto eq = item.find('=');
    if (eq == std::string::npos) continue;
    std::string dev = item.substr(0, eq), value = item.substr(eq + 1);
    auto bytes = parse_mem_value(value);
    if (!bytes) continue;
    auto it = c.pinned_mem_limits.find(dev);
    if (it == c.pinned_mem_limits.end() || *bytes < it->second.bytes) c.pinned_mem_limits[dev] = Limit{value, *bytes};
  }
  return c;
}

std::optional<std::uint64_t> parse_mem_value(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0 || i > 15) return std::nullopt;
  std::string unit = text.substr(i);
  int shift = 0;
  if (unit == "K" || unit == "KB") shift = 10;
  else if (unit == "M" || unit == "MB") shift = 20;
  else if (unit == "G" || unit == "GB") shift = 30;
  else if (unit == "T" || unit == "TB") shift = 40;
  else return std::nullopt;
  std::uint64_t n = std::strtoull(text.substr(0, i).c_str(), nullptr, 10);
  if (n > (UINT64_MAX >> shift)) return std::nullopt;
  return n << shift;
}

Outcome execute(State& state, const std::string& line) {
  Outcome out;
  auto w = words(line);
  if (w.empty()) return out;
  const std::string& cmd = w[0];
  auto usage = [&](const std::string& form) { out.reply = {"Usage: " + form}; return out; };
  // Each of these answers the daemon's own error text and returns null/false
  // when its argument is refused; the command then ends with that reply.
  auto server_of = [&](const std::string& pid) -> Server* {
    std::string err;
    Server* server = find_server(state, pid, err);
    if (!server) out.reply = {err};
    return server;
  };
  auto device_ok = [&](const std::string& dev) {
    auto err = check_device(state, dev);
    if (!err.empty()) out.reply = {err};
    return err.empty();
  };
  auto percentage_of = [&](const std::string& text) {
    auto p = parse_percentage(text);
    if (!p) out.reply = {"Invalid active thread percentage " + text + ": expected a number greater than 0 and at most 100"};
    return p;
  };
  auto limit_of = [&](const std::string& text) -> std::optional<Limit> {
    auto bytes = parse_mem_value(text);
    if (!bytes) {
      out.reply = {"Invalid memory limit " + text + ": expected a number with a unit, e.g. 512M or 2G"};
      return std::nullopt;
    }
    return Limit{text, *bytes};
  };
  auto limit_text = [](const std::map<std::string, Limit>& limits, const std::string& dev) {
    auto it = limits.find(dev);
    return it == limits.end() ? std::string("0") : it->second.text;
  };

  if (cmd == "get_server_list") {
    if (w.size() != 1) return usage("get_server_list");
    for (const auto& s : state.servers) out.reply.push_back(std::to_string(s.pid));
    return out;
  }
  if (cmd == "start_server") {
    if (w.size() != 3 || w[1] != "-uid") return usage("start_server -uid <user id>");
    auto uid = parse_long(w[2]);
    if (!uid) return usage("start_server -uid <user id>");
    for (const auto& s : state.servers)
      if (s.uid == *uid) return out;  // one server per user: already there
    out.start_server = *uid;
    return out;
  }
  if (cmd == "set_default_active_thread_percentage") {
    if (w.size() != 2) return usage("set_default_active_thread_percentage <percentage>");
    auto p = percentage_of(w[1]);
    if (!p) return out;
    state.thread_percentage = *p;
    state.thread_percentage_set = true;
    return out;
  }
  if (cmd == "get_default_active_thread_percentage") {
    if (w.size() != 1) return usage("get_default_active_thread_percentage");
    out.reply = {one_decimal(state.thread_percentage)};
    return out;
  }
  if (cmd == "set_default_device_pinned_mem_limit") {
    if (w.size() != 3) return usage("set_default_device_pinned_mem_limit <dev> <value>");
    if (!device_ok(w[1])) return out;
    auto limit = limit_of(w[2]);
    if (limit) state.pinned_mem_limits[w[1]] = *limit;
    return out;
  }
  if (cmd == "get_default_device_pinned_mem_limit") {
    if (w.size() != 2) return usage("get_default_device_pinned_mem_limit <dev>");
    if (device_ok(w[1])) out.reply = {limit_text(state.pinned_mem_limits, w[1])};
    return out;
  }
  if (cmd == "get_client_list") {
    if (w.size() != 2) return usage("get_client_list <server PID>");
    Server* server = server_of(w[1]);
    if (!server) return out;
    for (const auto& c : state.clients)
      if (c.server == server->pid) out.reply.push_back(std::to_string(c.pid ? c.pid : c.reported_pid));
    return out;
  }
  if (cmd == "set_active_thread_percentage") {
    if (w.size() != 3) return usage("set_active_thread_percentage <server PID> <percentage>");
    Server* server = server_of(w[1]);
    if (!server) return out;
    auto p = percentage_of(w[2]);
    if (p) server->thread_percentage = *p;
    return out;
  }
  if (cmd == "get_active_thread_percentage") {
    if (w.size() != 2) return usage("get_active_thread_percentage <server PID>");
    if (Server* server = server_of(w[1])) out.reply = {one_decimal(server->thread_percentage)};
    return out;
  }
  if (cmd == "set_device_pinned_mem_limit") {
    if (w.size() != 4) return usage("set_device_pinned_mem_limit <server PID> <dev> <value>");
    Server* server = server_of(w[1]);
    if (!server || !device_ok(w[2])) return out;
    auto limit = limit_of(w[3]);
    if (limit) server->pinned_mem_limits[w[2]] = *limit;
    return out;
  }
  if (cmd == "get_device_pinned_mem_limit") {
    if (w.size() != 3) return usage("get_device_pinned_mem_limit <server PID> <dev>");
    Server* server = server_of(w[1]);
    if (server && device_ok(w[2])) out.reply = {limit_text(server->pinned_mem_limits, w[2])};
    return out;
  }
  if (cmd == "quit") {
    if (w.size() == 1) {
      out.quit = true;
      return out;
    }
    if (w.size() == 3 && w[1] == "-t") {
      if (auto t = parse_long(w[2])) {
        state.quit_timeout = *t;
        out.quit = true;
        return out;
      }
    }
    return usage("quit [-t <timeout in seconds>]");
  }
  // Real commands this simulator does not model, so a test sees why nothing happened.
  static const char* const kNotSimulated[] = {
      "get_server_status", "get_device_client_list", "shutdown_server", "terminate_client", "ps",
      "set_default_chunk_size", "get_default_chunk_size"};
  for (const char* known : kNotSimulated)
    if (cmd == known) {
      out.reply = {"tessera sim: " + cmd + " is a real command the simulator does not model"};
      return out;
    }
  out.reply = {"Unrecognized command: " + cmd};
  return out;
}

std::string to_json(const State& s) {
  std::ostringstream o;
  o << "{\n";
  o << "  \"simulator\": \"tessera nvidia-cuda-mps-control\",\n";
  o << "  \"pid\": " << s.pid << ",\n";
  o << "  \"running\": " << (s.running ? "true" : "false") << ",\n";
  o << "  \"started_at\": " << escape(s.started_at) << ",\n";
  o << "  \"pipe_directory\": " << escape(s.pipe_dir) << ",\n";
  o << "  \"log_directory\": " << escape(s.log_dir) << ",\n";
  o << "  \"cuda_visible_devices\": " << (s.cuda_visible_devices ? escape(*s.cuda_visible_devices) : "null") << ",\n";
  o << "  \"ld_library_path\": " << (s.ld_library_path ? escape(*s.ld_library_path) : "null") << ",\n";
  o << "  \"visible_devices\": [";
  for (size_t i = 0; i < s.visible.size(); ++i) o << (i ? ", " : "") << escape(s.visible[i]);
  o << "],\n";
  o << "  \"hang\": " << (s.hang ? "true" : "false") << ",\n";
  o << "  \"multi_user\": " << (s.multi_user ? "true" : "false") << ",\n";
  o << "  \"default_active_thread_percentage\": " << one_decimal(s.thread_percentage) << ",\n";
  o << "  \"default_active_thread_percentage_set\": " << (s.thread_percentage_set ? "true" : "false") << ",\n";
  o << "  \"default_device_pinned_mem_limits\": {";
  bool first = true;
  for (const auto& [dev, limit] : s.pinned_mem_limits) {
    o << (first ? "\n" : ",\n") << "    " << escape(dev) << ": {\"value\": " << escape(limit.text)
      << ", \"bytes\": " << limit.bytes << "}";
    first = false;
  }
  o << (first ? "},\n" : "\n  },\n");
  auto limits = [&](const std::map<std::string, Limit>& m) {
    std::string text = "{";
    bool first_limit = true;
    for (const auto& [dev, limit] : m) {
      text += (first_limit ? "" : ", ") + escape(dev) + ": " + escape(limit.text);
      first_limit = false;
    }
    return text + "}";
  };
  o << "  \"servers\": [";
  for (size_t i = 0; i < s.servers.size(); ++i)
    o << (i ? ", " : "") << "{\"pid\": " << s.servers[i].pid << ", \"uid\": " << s.servers[i].uid
      << ", \"active_thread_percentage\": " << one_decimal(s.servers[i].thread_percentage)
      << ", \"device_pinned_mem_limits\": " << limits(s.servers[i].pinned_mem_limits) << "}";
  o << "],\n";
  o << "  \"clients\": [";
  for (size_t i = 0; i < s.clients.size(); ++i)
    o << (i ? ", " : "") << "{\"id\": " << s.clients[i].id << ", \"pid\": " << s.clients[i].pid
      << ", \"reported_pid\": " << s.clients[i].reported_pid << ", \"uid\": " << s.clients[i].uid
      << ", \"server\": " << s.clients[i].server
      << ", \"active_thread_percentage\": " << one_decimal(s.clients[i].thread_percentage)
      << ", \"device_pinned_mem_limits\": " << limits(s.clients[i].pinned_mem_limits)
      << ", \"connected_at\": " << escape(s.clients[i].connected_at) << "}";
  o << "],\n";
  o << "  \"commands\": [";
  for (size_t i = 0; i < s.commands.size(); ++i) o << (i ? ", " : "") << escape(s.commands[i]);
  o << "],\n";
  o << "  \"quit_timeout\": " << (s.quit_timeout ? std::to_string(*s.quit_timeout) : "null") << "\n";
  o << "}\n";
  return o.str();
}

}  // namespace tessera_mps_sim
