#include "calls.hpp"

#include <cstring>

namespace tessera_cuda_sim {

namespace {
std::atomic<CallCounter*> registry{nullptr};  // a push-only list: counters are function-local statics
}

CallCounter::CallCounter(const char* name) : name_(name) {
  next_ = registry.load(std::memory_order_relaxed);
  while (!registry.compare_exchange_weak(next_, this, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

unsigned long long CallCounter::count_of(const char* name) {
  for (CallCounter* c = registry.load(std::memory_order_acquire); c; c = c->next_)
    if (std::strcmp(c->name_, name) == 0) return c->count_.load(std::memory_order_relaxed);
  return 0;
}

void CallCounter::reset_all() {
  for (CallCounter* c = registry.load(std::memory_order_acquire); c; c = c->next_)
    c->count_.store(0, std::memory_order_relaxed);
}

}  // namespace tessera_cuda_sim
