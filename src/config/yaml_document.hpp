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

// Go's strconv.ParseInt(s, 0, 64), as yaml.v2 and NVIDIA's readers parse
// integers: optional sign, 0x/0o/0b, a leading 0 for octal, else decimal.
// False when it is not such an integer; `overflow` when the digits are valid
// but the value does not fit an int64.
bool go_parse_int(std::string_view s, int64_t& out, bool& overflow);

// Limits on hostile inputs: config files are kilobytes.
constexpr size_t kMaxConfigBytes = 1 << 20;
constexpr int kMaxNestingDepth = 64;

struct YamlEntry;

// What a plain scalar is to NVIDIA's readers (sigs.k8s.io/yaml over yaml.v2,
// YAML 1.1): `yes`, `on` and `y` are booleans, `0x10`, `010` (octal) and
// `1_000` integers, `2.0` a float. A quoted scalar is always a string.
enum class ScalarKind { null, boolean, integer, floating, string };

// How a map's keys are checked.
struct KeyRules {
  bool unknown_is_error = true;      // else a warning (NVIDIA's non-strict readers ignore unknown keys)
  bool duplicates_are_errors = true;  // else a warning, and the last one is used (as yaml.v2 does)
  bool ignore_case = false;           // Go's encoding/json matches struct fields case-insensitively
};

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

  // The same reads as NVIDIA's Go readers make them (YAML 1.1 through JSON):
  // what this scalar resolves to; a boolean (yes/no/on/off/y/n/true/false);
  // an integer (decimal, 0x, 0o, 0b, leading-0 octal, underscores, or an
  // integral float such as 2.0) in [min, max]; a string (a quoted scalar or a
  // plain one that is not a number, boolean or null).
  ScalarKind yaml11_kind() const;
  std::optional<bool> as_yaml11_bool(Diagnostics& diags) const;
  std::optional<int64_t> as_yaml11_int(Diagnostics& diags, int64_t min, int64_t max) const;
  std::optional<std::string> as_yaml11_string(Diagnostics& diags) const;

  // Reports every key not in `allowed` and every duplicate key; returns the entries.
  std::vector<Entry> checked_entries(Diagnostics& diags, std::initializer_list<std::string_view> allowed) const;
  // The same with the given rules; with ignore_case, each entry's key is the allowed spelling.
  std::vector<Entry> checked_entries(Diagnostics& diags, std::initializer_list<std::string_view> allowed,
                                     const KeyRules& rules) const;

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

// The integer a YAML 1.1 scalar denotes for a Go int field, if any: what
// yaml.v2 resolves and encoding/json then decodes (`08` and `2.0` included;
// `2.5` and values beyond int64 not).
std::optional<int64_t> yaml11_integer(std::string_view plain);

// `tessera ... --strict`: the same diagnostics, every warning an error.
Diagnostics warnings_as_errors(const Diagnostics& diags);

}  // namespace tessera::config
