// A FIFO of posted operations for one direction of a pair.
//
// Posts are matched in order, so a ring buffer is the whole data structure.
// The storage is reserved at connect time and only grows (doubling) when more
// operations are in flight than ever before, so steady-state posts do not
// allocate. Not thread-safe: a pair is driven by one thread at a time.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "ringlet/common/failure.h"

namespace ringlet::transport {

template <class T>
class PostQueue {
 public:
  explicit PostQueue(size_t capacity = 64) : slots_(round_up_pow2(capacity)) {}

  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }

  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }
  // i-th element from the front (0 = front).
  T& at(size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }

  void push(const T& value) {
    if (count_ == slots_.size()) grow();
    slots_[(head_ + count_) & (slots_.size() - 1)] = value;
    ++count_;
  }

  void pop() {
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
  }

 private:
  static size_t round_up_pow2(size_t n) {
    size_t p = 1;
    while (p < n) p <<= 1;
    return p;
  }

  void grow() {
    std::vector<T> bigger(slots_.size() * 2);
    for (size_t i = 0; i < count_; ++i) bigger[i] = at(i);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0;
  size_t count_ = 0;
};

// Fails every operation still queued (each holds `req`), in posting order.
template <class Post>
void fail_queued(PostQueue<Post>& queue, const common::Failure& why) {
  while (!queue.empty()) {
    queue.front().req->fail(why);
    queue.pop();
  }
}

}  // namespace ringlet::transport
