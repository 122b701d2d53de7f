#include "config/yaml_document.hpp"
#include "core/text.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <utility>

namespace tessera::config {
namespace {

// Aliases let a small file describe a huge tree ("billion laughs"); the walk
// below counts expanded nodes and stops early.
constexpr size_t kMaxExpandedNodes = 200000;

SourceLocation location(const YAML::Mark& mark, const DocumentContext* doc) {
  SourceLocation loc;
  if (doc) loc.file = doc->file;
  if (mark.line >= 0) {
    loc.line = mark.line + 1 + (doc ? doc->line_offset : 0);
    loc.column = mark.column + 1 + (doc ? doc->column_offset : 0);
  }
  return loc;
}

// Returns false when the tree is too deep or too large once aliases are expanded.
bool walk(const YAML::Node& node, int depth, size_t& count, std::string& why, YAML::Mark& at) {
  if (++count > kMaxExpandedNodes) {
    why = "the document expands to more than " + std::to_string(kMaxExpandedNodes) + " nodes (aliases?)";
    at = node.Mark();
    return false;
  }
  if (depth > kMaxNestingDepth) {
    why = "nesting is deeper than " + std::to_string(kMaxNestingDepth) + " levels";
    at = node.Mark();
    return false;
  }
  if (node.IsMap()) {
    for (const auto& kv : node)
      if (!walk(kv.first, depth + 1, count, why, at) || !walk(kv.second, depth + 1, count, why, at)) return false;
  } else if (node.IsSequence()) {
    for (const auto& item : node)
      if (!walk(item, depth + 1, count, why, at)) return false;
  }
  return true;
}

bool parse_integer(const std::string& text, int64_t& out) {
  const char* b = text.data();
  const char* e = b + text.size();
  if (b != e && *b == '+') ++b;
  auto [ptr, ec] = std::from_chars(b, e, out, 10);
  return ec == std::errc() && ptr == e && b != e;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

const std::regex& yaml_float_re() {
  static const std::regex re(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  return re;
}

struct Resolved {
  ScalarKind kind = ScalarKind::string;
  std::optional<int64_t> integer;  // what a Go int field receives
};

// yaml.v2's resolve() for a plain scalar, then what encoding/json makes of it for an int.
Resolved resolve_plain(std::string_view in) {
  static const std::set<std::string_view> kTrue = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
  static const std::set<std::string_view> kFalse = {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
  static const std::set<std::string_view> kNull = {"", "~", "null", "Null", "NULL"};
  static const std::set<std::string_view> kSpecialFloat = {".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf",
                                                           "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF"};
  Resolved r;
  if (kNull.count(in)) return {ScalarKind::null, std::nullopt};
  if (kTrue.count(in) || kFalse.count(in)) return {ScalarKind::boolean, std::nullopt};
  if (kSpecialFloat.count(in)) return {ScalarKind::floating, std::nullopt};
  char first = in[0];
  auto from_float = [](const std::string& text) -> Resolved {
    double d = std::strtod(text.c_str(), nullptr);
    Resolved f{ScalarKind::floating, std::nullopt};
    // encoding/json sees the float as JSON prints it: integral values below 1e21 as plain digits.
    if (std::isfinite(d) && d == std::floor(d) && d >= -9.223372036854775808e18 && d < 9.223372036854775808e18)
      f.integer = static_cast<int64_t>(d);
    return f;
  };
  if (first == '.') {
    std::string text(in);
    if (std::regex_match(text, yaml_float_re())) return from_float(text);
    return r;
  }
  if (!is_digit(first) && first != '+' && first != '-') return r;
  std::string plain;
  for (char c : in)
    if (c != '_') plain += c;
  int64_t v = 0;
  bool overflow = false;
  if (go_parse_int(plain, v, overflow)) return {ScalarKind::integer, v};
  if (overflow) return {ScalarKind::integer, std::nullopt};  // a uint64: no Go int holds it
  if (std::regex_match(plain, yaml_float_re())) return from_float(plain);
  return r;
}

bool is_string_tagged(const YAML::Node& node) {
  const std::string& tag = node.Tag();
  return tag == "!" || tag == "tag:yaml.org,2002:str" || tag == "!!str";
}

}  // namespace

// Go's strconv.ParseInt(s, 0, 64): optional sign, then 0x/0o/0b, a leading 0
// (octal) or decimal digits. Sets `overflow` when the digits are valid but
// the value does not fit (yaml.v2 then reads it as a uint64 or fails).
bool go_parse_int(std::string_view s, int64_t& out, bool& overflow) {
  overflow = false;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  int base = 10;
  if (s.size() >= 2 && s[0] == '0') {
    char p = s[1];
    if (p == 'x' || p == 'X') base = 16, s.remove_prefix(2);
    else if (p == 'o' || p == 'O') base = 8, s.remove_prefix(2);
    else if (p == 'b' || p == 'B') base = 2, s.remove_prefix(2);
    else base = 8, s.remove_prefix(1);
  }
  if (s.empty()) return false;
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ptr != s.data() + s.size()) return false;
  if (ec != std::errc()) return false;  // beyond uint64 too: yaml.v2 keeps the text as a string
  if (v > static_cast<uint64_t>(INT64_MAX) + (negative ? 1 : 0)) {
    overflow = !negative;  // a uint64 for yaml.v2; a negative one is tried as a float
    return false;
  }
  out = negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

std::optional<int64_t> yaml11_integer(std::string_view plain) {
  auto r = resolve_plain(plain);
  if (r.kind != ScalarKind::integer && r.kind != ScalarKind::floating) return std::nullopt;
  return r.integer;
}

Diagnostics warnings_as_errors(const Diagnostics& diags) {
  Diagnostics out;
  for (const auto& d : diags.items()) {
    // Under --strict nothing is ignored: the file is refused.
    std::string_view message = d.message;
    if (d.severity == Severity::note) {
      out.note(d.where, d.field, d.message);
      continue;
    }
    if (d.severity == Severity::warning && message.ends_with("; ignored")) message.remove_suffix(9);
    out.error(d.where, d.field, std::string(message));
  }
  return out;
}

std::string join_allowed(std::initializer_list<std::string_view> allowed) {
  std::string out;
  for (auto a : allowed) {
    if (!out.empty()) out += ", ";
    out += a;
  }
  return out;
}

YamlNode::YamlNode() : node_(std::make_unique<YAML::Node>()) {}
YamlNode::YamlNode(const YAML::Node& node, std::string path, const DocumentContext* doc)
    : node_(std::make_unique<YAML::Node>(node)), path_(std::move(path)), doc_(doc) {}
YamlNode::YamlNode(const YamlNode& o) : node_(std::make_unique<YAML::Node>(*o.node_)), path_(o.path_), doc_(o.doc_) {}
YamlNode& YamlNode::operator=(const YamlNode& o) {
  if (this != &o) {
    node_ = std::make_unique<YAML::Node>(*o.node_);
    path_ = o.path_;
    doc_ = o.doc_;
  }
  return *this;
}
YamlNode::~YamlNode() = default;

SourceLocation YamlNode::where() const { return location(node_->Mark(), doc_); }
bool YamlNode::is_null() const { return !node_->IsDefined() || node_->IsNull(); }
bool YamlNode::is_map() const { return node_->IsMap(); }
bool YamlNode::is_sequence() const { return node_->IsSequence(); }
bool YamlNode::is_scalar() const { return node_->IsScalar(); }
bool YamlNode::is_quoted() const { return node_->IsScalar() && node_->Tag() == "!"; }
std::string YamlNode::scalar() const { return node_->IsScalar() ? node_->Scalar() : std::string(); }

std::string YamlNode::kind_name() const {
  if (is_null()) return "nothing";
  if (is_map()) return "a map";
  if (is_sequence()) return "a list";
  return quote(scalar());
}

YamlNode YamlNode::child(const std::string& key_path, const YAML::Node& node) const {
  return YamlNode(node, key_path, doc_);
}

std::vector<YamlNode::Entry> YamlNode::entries() const {
  std::vector<Entry> out;
  if (!node_->IsMap()) return out;
  std::vector<YAML::Node> merged;  // `<<: *anchor` (YAML 1.1 merge keys, as yaml.v2 reads them)
  for (const auto& kv : *node_) {
    std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string("<complex key>");
    if (key == "<<" && kv.first.Tag() != "!" && (kv.second.IsMap() || kv.second.IsSequence())) {
      if (kv.second.IsMap()) merged.push_back(kv.second);
      else
        for (const auto& m : kv.second) merged.push_back(m);
      continue;
    }
    std::string p = path_.empty() ? key : path_ + "." + key;
    out.push_back({key, location(kv.first.Mark(), doc_), YamlNode(kv.second, p, doc_)});
  }
  // Keys written in the map win over merged ones; among merged maps, the first wins.
  std::set<std::string> present;
  for (const auto& e : out) present.insert(e.key);
  for (const auto& m : merged) {
    if (!m.IsMap()) continue;
    for (const auto& e : YamlNode(m, path_, doc_).entries())
      if (present.insert(e.key).second) out.push_back(e);
  }
  return out;
}

std::vector<YamlNode> YamlNode::items() const {
  std::vector<YamlNode> out;
  if (!node_->IsSequence()) return out;
  size_t i = 0;
  for (const auto& item : *node_) out.emplace_back(item, path_ + "[" + std::to_string(i++) + "]", doc_);
  return out;
}

std::optional<std::string> YamlNode::as_string(Diagnostics& diags) const {
  if (!is_scalar() || is_null()) {
    diags.error(where(), path_, "expected a string, got " + kind_name());
    return std::nullopt;
  }
  return scalar();
}

std::optional<bool> YamlNode::as_bool(Diagnostics& diags) const {
  if (is_scalar() && !is_quoted()) {
    const std::string s = scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  diags.error(where(), path_, "expected true or false, got " + kind_name());
  return std::nullopt;
}

std::optional<int64_t> YamlNode::as_int(Diagnostics& diags, int64_t min, int64_t max) const {
  int64_t v = 0;
  if (!is_scalar() || is_quoted() || is_null() || !parse_integer(scalar(), v)) {
    diags.error(where(), path_, "expected an integer, got " + (is_quoted() ? "the string \"" + excerpt(scalar()) + "\"" : kind_name()));
    return std::nullopt;
  }
  if (v < min || v > max) {
    diags.error(where(), path_, std::to_string(v) + " is out of range (allowed: " + std::to_string(min) + " to " + std::to_string(max) + ")");
    return std::nullopt;
  }
  return v;
}

ScalarKind YamlNode::yaml11_kind() const {
  if (is_null()) return ScalarKind::null;
  if (!is_scalar()) return ScalarKind::string;
  if (is_string_tagged(*node_)) return ScalarKind::string;
  return resolve_plain(node_->Scalar()).kind;
}

std::optional<bool> YamlNode::as_yaml11_bool(Diagnostics& diags) const {
  if (is_scalar() && yaml11_kind() == ScalarKind::boolean) {
    static const std::set<std::string_view> kTrue = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
    return kTrue.count(node_->Scalar()) > 0;
  }
  diags.error(where(), path_, "expected true or false, got " + kind_name());
  return std::nullopt;
}

std::optional<int64_t> YamlNode::as_yaml11_int(Diagnostics& diags, int64_t min, int64_t max) const {
  std::optional<int64_t> v;
  if (is_scalar() && !is_null() && !is_string_tagged(*node_)) v = yaml11_integer(node_->Scalar());
  if (!v) {
    diags.error(where(), path_, "expected an integer, got " + (is_quoted() ? "the string \"" + excerpt(scalar()) + "\"" : kind_name()));
    return std::nullopt;
  }
  if (*v < min || *v > max) {
    diags.error(where(), path_, std::to_string(*v) + " is out of range (allowed: " + std::to_string(min) + " to " + std::to_string(max) + ")");
    return std::nullopt;
  }
  return v;
}

std::optional<std::string> YamlNode::as_yaml11_string(Diagnostics& diags) const {
  if (!is_scalar() || is_null()) {
    diags.error(where(), path_, "expected a string, got " + kind_name());
    return std::nullopt;
  }
  auto kind = yaml11_kind();
  if (kind != ScalarKind::string) {
    std::string what = kind == ScalarKind::boolean ? "the boolean " : "the number ";
    diags.error(where(), path_, "expected a string, got " + what + scalar() + " (quote it: \"" + scalar() + "\")");
    return std::nullopt;
  }
  return scalar();
}

std::vector<YamlNode::Entry> YamlNode::checked_entries(Diagnostics& diags,
                                                       std::initializer_list<std::string_view> allowed) const {
  return checked_entries(diags, allowed, KeyRules{});
}

std::vector<YamlNode::Entry> YamlNode::checked_entries(Diagnostics& diags, std::initializer_list<std::string_view> allowed,
                                                       const KeyRules& rules) const {
  auto all = entries();
  std::map<std::string, size_t> index;  // allowed key -> position in `out`
  std::vector<Entry> out;
  for (auto& e : all) {
    const std::string_view* match = nullptr;
    for (const auto& a : allowed)
      if (e.key == a || (rules.ignore_case && iequals(e.key, a))) {
        match = &a;
        if (e.key == a) break;
      }
    std::string field = path_.empty() ? e.key : path_ + "." + e.key;
    if (!match) {
      if (rules.unknown_is_error) diags.error(e.key_where, field, "unknown field " + quote(e.key) + " (allowed: " + join_allowed(allowed) + ")");
      else diags.warning(e.key_where, field, "unknown field " + quote(e.key) + " (allowed: " + join_allowed(allowed) + "); ignored");
      continue;
    }
    std::string key(*match);
    if (auto it = index.find(key); it != index.end()) {
      if (rules.duplicates_are_errors) {
        diags.error(e.key_where, field, "duplicate field " + quote(e.key));
        continue;
      }
      diags.warning(e.key_where, field, "duplicate field " + quote(e.key) + "; the last one is used");
      e.key = key;
      out[it->second] = std::move(e);
      continue;
    }
    index[key] = out.size();
    e.key = key;
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

// The parser names a tab only where it meets one in the indentation; a tab
// after a '-' or inside a line gives "illegal block entry" or "illegal map
// value". Where the line of the error (or the one before) holds a tab, say so.
std::string tab_hint(std::string_view text, const YAML::Mark& mark) {
  std::string_view before, at;  // the lines mark.line - 1 and mark.line (0-based)
  size_t start = 0;
  for (int n = 0; n <= mark.line; ++n) {
    if (start > text.size()) return "";
    const size_t end = std::min(text.find('\n', start), text.size());
    before = at;
    at = text.substr(start, end - start);
    start = end + 1;
  }
  for (const auto& [line, which] : {std::pair{at, " (this line"}, std::pair{before, " (the line before"}})
    if (const size_t tab = line.find('\t'); tab != std::string_view::npos)
      return std::string(which) + " holds a tab at column " + std::to_string(tab + 1) +
             ": YAML indents with spaces only; replace the tab with spaces)";
  return "";
}

}  // namespace

std::unique_ptr<YamlDocument> YamlDocument::parse(std::string_view text, DocumentContext context, Diagnostics& diags) {
  std::unique_ptr<YamlDocument> doc(new YamlDocument());
  doc->context_ = std::move(context);
  doc->root_ = std::make_unique<YAML::Node>();
  SourceLocation file_loc{doc->context_.file, 0, 0};
  if (text.size() > kMaxConfigBytes) {
    diags.error(file_loc, "", "file is too large (" + std::to_string(text.size()) + " bytes; the limit is " +
                                  std::to_string(kMaxConfigBytes) + ")");
    return doc;
  }
  if (text.find('\0') != std::string_view::npos) {
    diags.error(file_loc, "", "file contains a NUL byte; expected YAML text");
    return doc;
  }
  try {
    YAML::Node root = YAML::Load(std::string(text));
    size_t count = 0;
    std::string why;
    YAML::Mark at;
    if (!walk(root, 0, count, why, at)) {
      diags.error(location(at, &doc->context_), "", why);
      return doc;
    }
    *doc->root_ = root;
  } catch (const YAML::Exception& e) {
    diags.error(location(e.mark, &doc->context_), "", "invalid YAML: " + e.msg + tab_hint(text, e.mark));
  }
  return doc;
}

YamlNode YamlDocument::root() const { return YamlNode(*root_, "", &context_); }

YamlDocument::~YamlDocument() = default;

}  // namespace tessera::config
