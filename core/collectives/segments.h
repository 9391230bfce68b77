// The tensors of one allreduce_segments call seen as one message: element x of
// the message is element x - start[i] of tensor i, where start[] is the prefix
// sum of the counts. The window algorithms stage ranges of the message straight
// from the tensors (read) and write reduced ranges straight back (write), so a
// fused allreduce needs no fusion buffer and no pack/unpack passes of its own;
// the scale factors ride on those copies.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

#include "ringlet/kernels/cpu.h"
#include "ringlet/types.h"

namespace ringlet::core::collectives {

struct Segments {
  std::span<const kernels::cpu::ConstSegment> in;
  std::span<const kernels::cpu::Segment> out;
  const size_t* start;  // in.size() + 1 entries; start[in.size()] == total
  size_t total;
  DataType dtype;
  size_t es;

  // The first tensor holding message element x (x < total; empty tensors are
  // skipped: the last tensor whose start is <= x).
  size_t tensor_at(size_t x) const {
    return static_cast<size_t>(std::upper_bound(start, start + in.size() + 1, x) - start) - 1;
  }
  // The tensors that elements [lo, lo+len) touch: [first, end).
  void tensors_of(size_t lo, size_t len, size_t& first, size_t& end) const {
    first = len ? tensor_at(lo) : 0;
    end = len ? tensor_at(lo + len - 1) + 1 : 0;
  }

  // f(tensor, element within the tensor, element within the message, count)
  // for each non-empty piece of elements [lo, lo+len).
  template <class F>
  void for_each(size_t lo, size_t len, F&& f) const {
    if (len == 0) return;
    for (size_t i = tensor_at(lo); len > 0; ++i) {
      const size_t take = std::min(len, start[i + 1] - lo);
      if (take > 0) f(i, lo - start[i], lo, take);
      lo += take;
      len -= take;
    }
  }

  // dst[0, len) = factor * message[lo, lo+len), from the inputs.
  void read(std::byte* dst, size_t lo, size_t len, double factor, kernels::cpu::Store store) const {
    for_each(lo, len, [&](size_t i, size_t at, size_t x, size_t n) {
      const std::byte* src = static_cast<const std::byte*>(in[i].data) + at * es;
      copy_scaled(dst + (x - lo) * es, src, n, factor, store);
    });
  }
  // outputs' message[lo, lo+len) = src[0, len): results are scaled where
  // they are reduced, so this is a copy.
  void write(const std::byte* src, size_t lo, size_t len, kernels::cpu::Store store) const {
    for_each(lo, len, [&](size_t i, size_t at, size_t x, size_t n) {
      std::byte* dst = static_cast<std::byte*>(out[i].data) + at * es;
      kernels::cpu::copy(dst, src + (x - lo) * es, n * es, store);
    });
  }

 private:
  // A plain copy can stream; a scaled one goes through pack (ordinary stores).
  void copy_scaled(void* dst, const void* src, size_t n, double factor,
                   kernels::cpu::Store store) const {
    if (factor == 1.0) {
      kernels::cpu::copy(dst, src, n * es, store);
    } else {
      const kernels::cpu::ConstSegment seg{src, n};
      kernels::cpu::pack(dtype, dst, {&seg, 1}, factor);
    }
  }
};

}  // namespace ringlet::core::collectives
