// Internal: the first-in first-out queue the execution core keeps posted
// operations and stream heads in (src/run/core.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace pipeplan::run {

/// A first-in first-out queue on one buffer: popping advances the head, an
/// emptied queue starts again at the buffer's front, and a full buffer first
/// moves a dominating dead prefix out of the way, else grows.
template <class T>
class Fifo {
 public:
  bool empty() const { return head_ == tail_; }
  std::size_t size() const { return tail_ - head_; }
  const T& front() const { return items_[head_]; }
  const T& operator[](std::size_t i) const { return items_[head_ + i]; }
  void pop() {
    if (++head_ == tail_) head_ = tail_ = 0;
  }
  void push(const T& x) {
    if (tail_ == capacity_) make_room();
    items_[tail_++] = x;
  }

 private:
  void make_room() {
    if (head_ > 0 && 2 * head_ >= tail_) {
      std::move(items_.begin() + static_cast<std::ptrdiff_t>(head_),
                items_.begin() + static_cast<std::ptrdiff_t>(tail_), items_.begin());
      tail_ -= head_;
      head_ = 0;
      return;
    }
    capacity_ = std::max<std::size_t>(16, 2 * capacity_);
    items_.resize(capacity_);
  }

  std::vector<T> items_;
  std::size_t head_ = 0, tail_ = 0, capacity_ = 0;
};

}  // namespace pipeplan::run
