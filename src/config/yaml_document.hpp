// Strict YAML reading for the config formats: a parsed document whose nodes
// know where they came from, and typed accessors that report what was
// expected, where, and what is allowed. Keeps yaml-cpp out of the headers of
// the format readers' users.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostics.hpp"

namespace YAML { class Node; }

namespace tessera::config {

// Limits on hostile inputs: config files are kilobytes.
constexpr size_t kMaxConfigBytes = 1 << 20;
constexpr int kMaxNestingDepth = 64;

struct YamlEntry;

struct DocumentContext {
  std::string file;
  int line_offset = 0;    // for documents embedded in another file (a ConfigMap)
  int column_offset = 0;
};

// A node with its location. Cheap to copy (yaml-cpp nodes are handles).
class YamlNode {
 public:
  YamlNode();
  YamlNode(const YAML::Node& node, std::string path, const DocumentContext* doc);
  YamlNode(const YamlNode&);
  YamlNode& operator=(const YamlNode&);
  ~YamlNode();

  const std::string& path() const { return path_; }
  SourceLocation where() const;
  bool is_null() const;
  bool is_map() const;
  bool is_sequence() const;
  bool is_scalar() const;
  // True for a scalar written in quotes ("7"): such a value is a string, never a number.
  bool is_quoted() const;
  std::string scalar() const;
  std::string kind_name() const;  // "a map", "a list", "a string", "nothing"

  // Map entries in document order: key text, key location, value.
  using Entry = struct YamlEntry;
  std::vector<Entry> entries() const;
  std::vector<YamlNode> items() const;

  // Typed reads; each reports into `diags` and returns nothing on error.
  std::optional<std::string> as_string(Diagnostics& diags) const;
  std::optional<bool> as_bool(Diagnostics& diags) const;
  // An integer in [min, max].
  std::optional<int64_t> as_int(Diagnostics& diags, int64_t min, int64_t max) const;

  // Reports every key not in `allowed` and every duplicate key; returns the entries.
  std::vector<Entry> checked_entries(Diagnostics& diags, std::initializer_list<std::string_view> allowed) const;

  YamlNode child(const std::string& key_path, const YAML::Node& node) const;

 private:
  std::unique_ptr<YAML::Node> node_;
  std::string path_;
  const DocumentContext* doc_ = nullptr;
};

struct YamlEntry {
  std::string key;
  SourceLocation key_where;
  YamlNode value;
};

// A parsed document. Parse errors, oversize input and excessive nesting are
// reported with their location; the root is null then.
class YamlDocument {
 public:
  static std::unique_ptr<YamlDocument> parse(std::string_view text, DocumentContext context, Diagnostics& diags);
  YamlNode root() const;
  const DocumentContext& context() const { return context_; }
  ~YamlDocument();

 private:
  YamlDocument() = default;
  DocumentContext context_;
  std::unique_ptr<YAML::Node> root_;
};

std::string join_allowed(std::initializer_list<std::string_view> allowed);

}  // namespace tessera::config
