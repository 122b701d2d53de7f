#include "reconciler/journal.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "core/file_read.hpp"

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

namespace {

// A field of the journal, whatever the file holds there: text that is not a
// string (a hand-edited or foreign file) reads as empty, never an exception.
std::string text_of(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

constexpr size_t kMaxJournalBytes = 16u << 20;

}  // namespace

Result<std::optional<Journal>> JournalFile::load() const {
  std::error_code ec;
  if (!std::filesystem::exists(journal_path(), ec)) return std::optional<Journal>{};
  auto text = read_whole_file(journal_path(), kMaxJournalBytes);
  if (!text) return fail(Errc::io, journal_path() + ": " + text.error().message + " (move it away to start afresh)");
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return fail(Errc::parse, journal_path() + " is not a tessera MIG journal (move it away to start afresh)");
  Journal out;
  out.config_file = text_of(j, "config_file");
  out.config_name = text_of(j, "config_name");
  out.started = text_of(j, "started");
  out.finished = text_of(j, "finished");
  out.outcome = text_of(j, "outcome");
  out.error = text_of(j, "error");
  if (auto steps = j.find("steps"); steps != j.end() && steps->is_array())
    for (const auto& s : *steps) {
      if (!s.is_object()) continue;
      auto gpu = s.find("gpu");
      const uint32_t index = gpu != s.end() && gpu->is_number_unsigned() ? gpu->get<uint32_t>() : 0;
      out.steps.push_back({index, text_of(s, "operation"), text_of(s, "status"), text_of(s, "detail")});
    }
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
