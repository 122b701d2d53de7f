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
    : client_(std::move(client)),
      options_(std::move(options)),
      list_(std::make_shared<json>(json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array()}})) {
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

void ListWatch::put(size_t collection, const std::string& key, json* item) {
  pending_.push_back(Change{collection, key, item ? std::optional<json>(std::move(*item)) : std::nullopt});
  flush(false);
}

void ListWatch::flush(bool now) {
  if (pending_.empty()) return;
  // Only snapshot() hands the List out, under mu_, so its count cannot grow meanwhile.
  if (list_.use_count() > 1) {
    if (!now) return;
    list_ = std::make_shared<json>(*list_);
  } else {
    std::atomic_thread_fence(std::memory_order_acquire);  // after the last reader's release
  }
  json& items = (*list_)["items"];
  for (auto& change : pending_) apply(items, change);
  pending_.clear();
  ++version_;
}

void ListWatch::apply(json& items, Change& change) {
  Collection& c = collections_[change.collection];
  auto found = c.at.find(change.key);
  if (change.item && found != c.at.end()) {
    items[found->second] = std::move(*change.item);
    return;
  }
  if (change.item) {
    c.at[change.key] = items.size();
    owner_.emplace_back(change.collection, change.key);
    items.push_back(std::move(*change.item));
    return;
  }
  if (found == c.at.end()) return;
  // Removed: the last item takes its place.
  const size_t place = found->second, last = items.size() - 1;
  c.at.erase(found);
  if (place != last) {
    items[place] = std::move(items[last]);
    owner_[place] = std::move(owner_[last]);
    collections_[owner_[place].first].at[owner_[place].second] = place;
  }
  items.erase(last);
  owner_.pop_back();
}

void ListWatch::clear(size_t collection) {
  flush(true);  // what is in the List first: a change waiting for a key not in it yet would come back
  std::vector<std::string> keys;
  for (const auto& [key, place] : collections_[collection].at) keys.push_back(key);
  for (const auto& key : keys) put(collection, key, nullptr);
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
        clear(index);
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
      std::lock_guard lock(mu_);
      Collection& c = collections_[index];
      clear(index);
      for (auto& item : (*list)["items"]) {
        std::string key = key_of(item);
        if (!key.empty()) put(index, key, &item);
      }
      c.listed = true;
      c.error.clear();
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
        put(index, key, kept ? &object : nullptr);
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

ApiResult<ListWatch::Snapshot> ListWatch::snapshot(std::chrono::milliseconds wait) {
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
  flush(true);
  return Snapshot{list_, version_};
}

}  // namespace tessera::kube
