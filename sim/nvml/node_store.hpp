// A node directory shared by every process that uses it: `node.json` holds
// the node, `node.lock` serialises writers (flock). Writers lock, read the
// freshest file, change it and replace it atomically (temporary file +
// rename); readers never lock, since a rename shows them either the old file
// or the new one, whole. A reader re-parses only when the file was replaced:
// it keeps the file it parsed open, so the inode cannot be reused and a
// changed inode number means a new file.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "node.hpp"

namespace tessera::sim {

class NodeStore {
 public:
  // Writes a new node directory (created if missing; refused if it already
  // holds a node).
  [[nodiscard]] static Result<void> create(const std::string& dir, const Node& node);
  // Opens an existing node directory.
  [[nodiscard]] static Result<std::unique_ptr<NodeStore>> open(const std::string& dir);

  NodeStore(const NodeStore&) = delete;
  NodeStore& operator=(const NodeStore&) = delete;
  ~NodeStore();

  const std::string& dir() const { return dir_; }

  // The node as last written by anyone.
  [[nodiscard]] Result<std::shared_ptr<const Node>> read();
  // Under the exclusive lock: runs `change` on the freshest node and writes
  // the result back when it returns true. Returns whether it was written.
  [[nodiscard]] Result<bool> update(const std::function<bool(Node&)>& change);

 private:
  explicit NodeStore(std::string dir, int lock_fd) : dir_(std::move(dir)), lock_fd_(lock_fd) {}
  [[nodiscard]] Result<void> refresh();
  [[nodiscard]] Result<void> write(const Node& node);

  std::string dir_;
  int lock_fd_ = -1;
  int file_fd_ = -1;  // the node.json parsed last, kept open to pin its inode
  unsigned long cached_ino_ = 0;
  unsigned long cached_dev_ = 0;
  std::shared_ptr<const Node> cached_;
};

}  // namespace tessera::sim
