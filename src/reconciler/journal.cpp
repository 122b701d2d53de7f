#include "reconciler/journal.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

namespace tessera::reconciler {
namespace {

// Write to a temporary file in the same directory, flush, then rename: the
// file is always either the old or the new content.
Result<void> write_atomically(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return fail(Errc::io, "cannot write " + tmp);
    out << content;
    out.flush();
    if (!out) return fail(Errc::io, "cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return fail(Errc::io, "cannot rename " + tmp + " to " + path + ": " + ec.message());
  return {};
}

}  // namespace

size_t Journal::done() const {
  size_t n = 0;
  for (const auto& s : steps) n += s.status == "done";
  return n;
}

std::string utc_now() {
  auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

JournalFile::JournalFile(std::string state_dir) : dir_(std::move(state_dir)) {}

Result<std::optional<Journal>> JournalFile::load() const {
  std::ifstream in(journal_path());
  if (!in) return std::optional<Journal>{};
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return fail(Errc::parse, journal_path() + " is not a tessera MIG journal (move it away to start afresh)");
  Journal out;
  out.config_file = j.value("config_file", "");
  out.config_name = j.value("config_name", "");
  out.started = j.value("started", "");
  out.finished = j.value("finished", "");
  out.outcome = j.value("outcome", "");
  out.error = j.value("error", "");
  if (j.contains("steps") && j["steps"].is_array())
    for (const auto& s : j["steps"])
      out.steps.push_back({s.value("gpu", 0u), s.value("operation", ""), s.value("status", ""), s.value("detail", "")});
  return std::optional<Journal>{out};
}

Result<void> JournalFile::save(const Journal& journal) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return fail(Errc::io, "cannot create state directory " + dir_ + ": " + ec.message());
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : journal.steps)
    steps.push_back({{"gpu", s.gpu}, {"operation", s.operation}, {"status", s.status}, {"detail", s.detail}});
  nlohmann::json j = {{"config_file", journal.config_file}, {"config_name", journal.config_name},
                      {"started", journal.started},         {"finished", journal.finished},
                      {"outcome", journal.outcome},         {"error", journal.error},
                      {"steps", steps}};
  return write_atomically(journal_path(), j.dump(2) + "\n");
}

Result<void> JournalFile::write_state(const std::string& value) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  return write_atomically(state_path(), value + "\n");
}

}  // namespace tessera::reconciler
