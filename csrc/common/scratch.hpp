// Scratch<T>: n values of a trivial type T on the heap, NOT initialised
// (a std::vector would zero them first): for working arrays that every
// user writes before it reads, allocated once per call of a chunked loop,
// where zero-filling them would cost a pass over memory per call.  Large
// ones are mapped from the system (common/pages.hpp).
#pragma once

#include <cstddef>
#include <type_traits>

#include "common/pages.hpp"

namespace cepam {

template <class T>
class Scratch {
  static_assert(std::is_trivially_default_constructible_v<T>, "left uninitialised");

 public:
  explicit Scratch(std::size_t n) : data_(page_array<T>(n)), size_(n) {}
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  // Makes room for n values at least, for a buffer used again: reallocated
  // (the values lost) only if it holds fewer.
  void reserve(std::size_t n) {
    if (n <= size_) return;
    data_ = page_array<T>(n);
    size_ = n;
  }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }

 private:
  PageArray<T> data_;
  std::size_t size_;
};

}  // namespace cepam
