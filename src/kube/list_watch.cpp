#include "kube/list_watch.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace tessera::kube {

using json = nlohmann::json;

namespace {

// namespace/name, or "" when the object has no name.
std::string key_of(const json& object) {
  if (!object.is_object()) return "";
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  auto name = meta->find("name");
  if (name == meta->end() || !name->is_string()) return "";
  auto ns = meta->find("namespace");
  return (ns != meta->end() && ns->is_string() ? ns->get<std::string>() : std::string()) + "/" + name->get<std::string>();
}

}  // namespace

ListWatch::ListWatch(std::unique_ptr<Client> client, std::vector<WatchedCollection> collections, ListWatchOptions options)
    : client_(std::move(client)), options_(std::move(options)) {
  for (auto& c : collections) collections_.push_back(Collection{std::move(c), {}, false, {}});
  for (size_t i = 0; i < collections_.size(); ++i) threads_.emplace_back([this, i] { run(i); });
}

ListWatch::~ListWatch() { stop(); }

void ListWatch::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  client_->stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

bool ListWatch::pause(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !changed_.wait_for(lock, d, [&] { return stopping_; });
}

ListWatch::Stats ListWatch::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ListWatch::run(size_t index) {
  const WatchedCollection what = [&] {
    std::lock_guard lock(mu_);
    return collections_[index].what;
  }();
  auto fail = [&](const std::string& why) {
    std::lock_guard lock(mu_);
    collections_[index].error = why;
    changed_.notify_all();
  };
  auto backoff = options_.backoff_initial;
  auto wait_after_failure = [&] {
    const auto d = backoff;
    backoff = std::min(options_.backoff_max, backoff * 2);
    return pause(d);
  };
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    auto list = client_->list_all(what.path, what.kind, what.api_version, what.keep, options_.page, what.wanted);
    std::string version;
    if (!list && list.error().status == 404 && what.optional) {
      {
        std::lock_guard lock(mu_);
        Collection& c = collections_[index];
        if (!c.items.empty() || !c.listed) dirty_ = true;
        c.items.clear();
        c.listed = true;
        c.error.clear();
        ++stats_.lists;
        changed_.notify_all();
      }
      spdlog::debug("{}: not served; looked for again in {} s", what.path, options_.absent_recheck.count() / 1000);
      if (!pause(options_.absent_recheck)) return;
      continue;
    }
    if (!list) {
      spdlog::warn("{}: cannot list: {}; tried again in {} ms", what.path, list.error().message, backoff.count());
      fail(list.error().message);
      if (!wait_after_failure()) return;
      continue;
    }
    version = (*list)["metadata"].value("resourceVersion", "");
    const size_t listed = (*list)["items"].size();
    {
      std::map<std::string, json> items;
      for (auto& item : (*list)["items"]) {
        std::string key = key_of(item);
        if (!key.empty()) items[key] = std::move(item);
      }
      std::lock_guard lock(mu_);
      Collection& c = collections_[index];
      c.items = std::move(items);
      c.listed = true;
      c.error.clear();
      dirty_ = true;
      ++stats_.lists;
      changed_.notify_all();
    }
    spdlog::info("{}: listed {} items at resourceVersion {}; watching from there", what.path, listed, version);
    backoff = options_.backoff_initial;
    // Watch from the list's version until a watch fails; then list again.
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (stopping_) return;
        ++stats_.watches;
      }
      const auto opened = std::chrono::steady_clock::now();
      uint64_t events = 0;
      auto on_event = [&](const WatchEvent& e) {
        if (e.type == "BOOKMARK") return true;
        json& object = *e.object;
        if (object.is_object()) {
          if (!object.contains("kind")) object["kind"] = what.kind;
          if (!object.contains("apiVersion")) object["apiVersion"] = what.api_version;
        }
        std::string key = key_of(object);
        if (key.empty()) return true;
        const bool kept = e.type != "DELETED" && (!what.keep || what.keep(object));
        std::lock_guard lock(mu_);
        Collection& c = collections_[index];
        if (kept) c.items[key] = std::move(object);
        else if (c.items.erase(key) == 0) return true;
        dirty_ = true;
        ++stats_.events;
        ++events;
        return true;
      };
      auto ended = client_->watch(what.path, version, on_event, options_.watch_seconds, what.wanted);
      if (!ended) {
        if (ended.error().status == 410) {
          // The version is older than the server keeps: what changed since is lost, so list again.
          spdlog::info("{}: watch expired (410); listing again", what.path);
          break;
        }
        spdlog::warn("{}: watch failed: {}; listing again in {} ms", what.path, ended.error().message, backoff.count());
        fail(ended.error().message);
        if (!wait_after_failure()) return;
        break;
      }
      version = *ended;
      // A server or proxy that ends every watch at once must not make this a busy loop.
      if (events == 0 && std::chrono::steady_clock::now() - opened < std::chrono::seconds(1)) {
        if (!wait_after_failure()) return;
      } else {
        backoff = options_.backoff_initial;
      }
    }
  }
}

ApiResult<std::shared_ptr<const json>> ListWatch::snapshot(std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, wait, [&] {
    return stopping_ || std::all_of(collections_.begin(), collections_.end(),
                                    [](const Collection& c) { return c.listed || !c.error.empty(); });
  });
  if (stopping_) return unexpected(ApiError{0, "", "the cluster's watches are stopped"});
  for (const auto& c : collections_) {
    if (!c.error.empty()) return unexpected(ApiError{0, "", c.error});
    if (!c.listed)
      return unexpected(ApiError{0, "", c.what.path + ": not listed yet (waited " + std::to_string(wait.count()) + " ms)"});
  }
  if (dirty_ || !cached_) {
    cached_.reset();  // freed now unless a reader still holds it
    json items = json::array();
    for (const auto& c : collections_)
      for (const auto& [key, item] : c.items) items.push_back(item);
    cached_ = std::make_shared<const json>(json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", std::move(items)}});
    dirty_ = false;
  }
  return cached_;
}

}  // namespace tessera::kube
