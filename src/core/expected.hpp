// tessera::expected: std::expected where the library has it (GCC 12 in
// C++23 mode), a small compatible stand-in where it does not (clang 14 with
// libstdc++ 12 lacks the concepts level <expected> requires; the fuzzers are
// built with clang). Only the members tessera uses are provided.
#pragma once

#include <utility>
#include <version>

#if defined(__cpp_lib_expected)
#include <expected>
namespace tessera {
using std::expected;
using std::unexpected;
}  // namespace tessera
#else
#include <cstdlib>
#include <new>
#include <type_traits>

namespace tessera {

template <class E>
class unexpected {
 public:
  explicit unexpected(E e) : error_(std::move(e)) {}
  const E& error() const& { return error_; }
  E& error() & { return error_; }
  E&& error() && { return std::move(error_); }

 private:
  E error_;
};

template <class T, class E>
class expected {
 public:
  using value_type = T;
  using error_type = E;

  expected() requires std::is_default_constructible_v<T> : ok_(true) { new (&value_) T(); }
  template <class U = T>
    requires std::is_constructible_v<T, U&&> && (!std::is_same_v<std::remove_cvref_t<U>, expected>) &&
             (!std::is_same_v<std::remove_cvref_t<U>, unexpected<E>>)
  expected(U&& v) : ok_(true) {  // NOLINT: implicit like std::expected
    new (&value_) T(std::forward<U>(v));
  }
  template <class G>
  expected(unexpected<G> u) : ok_(false) {  // NOLINT
    new (&error_) E(std::move(u).error());
  }
  expected(const expected& o) : ok_(o.ok_) {
    if (ok_) new (&value_) T(o.value_); else new (&error_) E(o.error_);
  }
  expected(expected&& o) noexcept : ok_(o.ok_) {
    if (ok_) new (&value_) T(std::move(o.value_)); else new (&error_) E(std::move(o.error_));
  }
  expected& operator=(expected o) {
    destroy();
    ok_ = o.ok_;
    if (ok_) new (&value_) T(std::move(o.value_)); else new (&error_) E(std::move(o.error_));
    return *this;
  }
  ~expected() { destroy(); }

  [[nodiscard]] bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  T& operator*() & { return value_; }
  const T& operator*() const& { return value_; }
  T&& operator*() && { return std::move(value_); }
  T* operator->() { return &value_; }
  const T* operator->() const { return &value_; }
  T& value() & { check(); return value_; }
  const T& value() const& { check(); return value_; }
  T&& value() && { check(); return std::move(value_); }
  E& error() & { return error_; }
  const E& error() const& { return error_; }
  E&& error() && { return std::move(error_); }
  template <class U>
  T value_or(U&& d) const& { return ok_ ? value_ : static_cast<T>(std::forward<U>(d)); }

 private:
  void check() const { if (!ok_) std::abort(); }
  void destroy() { if (ok_) value_.~T(); else error_.~E(); }
  bool ok_;
  union { T value_; E error_; };
};

template <class E>
class expected<void, E> {
 public:
  using value_type = void;
  using error_type = E;
  expected() : ok_(true) {}
  template <class G>
  expected(unexpected<G> u) : ok_(false), error_(std::move(u).error()) {}  // NOLINT
  [[nodiscard]] bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  void operator*() const {}
  void value() const { if (!ok_) std::abort(); }
  E& error() & { return error_; }
  const E& error() const& { return error_; }
  E&& error() && { return std::move(error_); }

 private:
  bool ok_;
  E error_{};
};

}  // namespace tessera
#endif
