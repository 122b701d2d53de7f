// A cache of collections kept current by watches, as client-go's informers keep one: each
// collection is listed once (in pages), then watched from the list's resourceVersion, and every
// event updates the cache; a watch the server ends is opened again from the last resourceVersion
// seen; 410 Expired lists the collection again, and so does a watch that fails, after a backoff.
// A reader then reads the cache, not the API server: an unchanged cluster costs nothing to read
// again (the same List and version). The items are kept once, in the List handed out: changes
// that come while a reader holds that List wait, and go into it once the reader lets it go (or
// into a copy, when the next snapshot comes first), so a reader's List never changes under it.
// https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/client.hpp"

namespace tessera::kube {

struct WatchedCollection {
  std::string path;         // its list's path: /api/v1/pods
  std::string kind;         // each item's kind where it has none (a typed list's items carry none)
  std::string api_version;  // likewise
  // A server that does not serve it (404) has none: cached as empty, and looked for again after
  // ListWatchOptions::absent_recheck (a CRD or an API group may be turned on later).
  bool optional = false;
  // Sees each item as it arrives (from a list page or an ADDED or MODIFIED event): it may trim
  // it; false leaves it out of the cache (and removes the copy there).
  std::function<bool(nlohmann::json&)> keep;
  // The fields of an item to build at all (as Client::list_all's `wanted`).
  FieldFilter wanted;
};

struct ListWatchOptions {
  size_t page = 500;             // items per list page
  int watch_seconds = 300;       // a watch's timeoutSeconds: the server ends it then, and it is opened again
  std::chrono::milliseconds backoff_initial{1000};  // after a failed list or watch; doubled to backoff_max
  std::chrono::milliseconds backoff_max{30000};
  std::chrono::milliseconds absent_recheck{60000};
};

class ListWatch {
 public:
  // Starts a thread per collection, each listing and then watching through `client` (its own:
  // stop() stops every call of it).
  ListWatch(std::unique_ptr<Client> client, std::vector<WatchedCollection> collections, ListWatchOptions options = {});
  ~ListWatch();
  ListWatch(const ListWatch&) = delete;
  ListWatch& operator=(const ListWatch&) = delete;

  // Every collection's items as one List (kind List, each item with its kind, in no particular
  // order), once each has been listed, and its version: the same version (never 0) while
  // nothing changed. Waits up to `wait` for a first list. An error (naming the collection)
  // while a collection has not been listed, or while its list or watch fails: a reader never
  // takes a cache that stopped following the cluster for current.
  struct Snapshot {
    std::shared_ptr<const nlohmann::json> list;
    uint64_t version = 0;
  };
  ApiResult<Snapshot> snapshot(std::chrono::milliseconds wait);

  // Ends the threads (their calls return at once); snapshot() then answers an error.
  void stop();

  struct Stats {
    uint64_t lists = 0;    // lists made (each of its pages counted once)
    uint64_t watches = 0;  // watches opened
    uint64_t events = 0;   // ADDED, MODIFIED and DELETED events applied
  };
  Stats stats() const;

 private:
  struct Collection {
    WatchedCollection what;
    std::map<std::string, size_t> at;  // namespace/name -> its item's place in the List
    bool listed = false;
    std::string error;  // why the cache does not follow it now ("" while it does)
  };
  void run(size_t index);
  struct Change {
    size_t collection;
    std::string key;
    std::optional<nlohmann::json> item;  // none: removed
  };
  // Under mu_: sets, adds or removes (nullptr) a collection's item: at once while no reader
  // holds the List, else when flush() can.
  void put(size_t collection, const std::string& key, nlohmann::json* item);
  // Under mu_: applies the changes waiting, in order, under a new version; into a copy of the List
  // while a reader holds it when `now`, else only once none does.
  void flush(bool now);
  void apply(nlohmann::json& items, Change& change);
  // Under mu_: removes every item of a collection.
  void clear(size_t collection);
  // Sleeps up to `d`; false when stopped meanwhile.
  bool pause(std::chrono::milliseconds d);

  std::unique_ptr<Client> client_;
  ListWatchOptions options_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Collection> collections_;
  bool stopping_ = false;
  std::shared_ptr<nlohmann::json> list_;  // {"kind": "List", "items": [...]}
  std::vector<std::pair<size_t, std::string>> owner_;  // each item's collection and key, by place
  std::vector<Change> pending_;
  uint64_t version_ = 1;
  Stats stats_;
  std::vector<std::thread> threads_;
};

}  // namespace tessera::kube
