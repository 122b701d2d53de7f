#include "config/yaml_document.hpp"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <set>

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

}  // namespace

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
  return "'" + scalar() + "'";
}

YamlNode YamlNode::child(const std::string& key_path, const YAML::Node& node) const {
  return YamlNode(node, key_path, doc_);
}

std::vector<YamlNode::Entry> YamlNode::entries() const {
  std::vector<Entry> out;
  if (!node_->IsMap()) return out;
  for (const auto& kv : *node_) {
    std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string("<complex key>");
    std::string p = path_.empty() ? key : path_ + "." + key;
    out.push_back({key, location(kv.first.Mark(), doc_), YamlNode(kv.second, p, doc_)});
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
    diags.error(where(), path_, "expected an integer, got " + (is_quoted() ? "the string \"" + scalar() + "\"" : kind_name()));
    return std::nullopt;
  }
  if (v < min || v > max) {
    diags.error(where(), path_, std::to_string(v) + " is out of range (allowed: " + std::to_string(min) + " to " + std::to_string(max) + ")");
    return std::nullopt;
  }
  return v;
}

std::vector<YamlNode::Entry> YamlNode::checked_entries(Diagnostics& diags,
                                                       std::initializer_list<std::string_view> allowed) const {
  auto all = entries();
  std::set<std::string> seen;
  std::vector<Entry> out;
  for (auto& e : all) {
    bool known = false;
    for (auto a : allowed) known = known || e.key == a;
    std::string field = path_.empty() ? e.key : path_ + "." + e.key;
    if (!known) {
      diags.error(e.key_where, field, "unknown field '" + e.key + "' (allowed: " + join_allowed(allowed) + ")");
      continue;
    }
    if (!seen.insert(e.key).second) {
      diags.error(e.key_where, field, "duplicate field '" + e.key + "'");
      continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

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
    diags.error(location(e.mark, &doc->context_), "", "invalid YAML: " + e.msg);
  }
  return doc;
}

YamlNode YamlDocument::root() const { return YamlNode(*root_, "", &context_); }

YamlDocument::~YamlDocument() = default;

}  // namespace tessera::config
