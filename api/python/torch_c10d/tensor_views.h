// How the ringlet backend hands torch tensors to Ringlet: checks that
// refuse what is not served, by name; views of a contiguous tensor's memory as
// Ringlet's Tensor (bytes, for ops that only move data, so that every dtype
// is served; or Ringlet's element type, for reductions); and the copy of a
// result into a tensor of any strides.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <vector>

#include "ringlet/ringlet.h"

namespace ringlet::torch_c10d {

// A dense CPU tensor, or PyTorch's error naming the op and what is served.
void check_tensor(const at::Tensor& t, const char* op);
// One such tensor (torch's lists of one tensor per process).
void check_one(const std::vector<at::Tensor>& tensors, const char* op);

// A contiguous tensor's memory as Ringlet moves it: nbytes uint8 elements.
ringlet::Tensor as_bytes(const at::Tensor& contiguous);

// How Ringlet reduces a torch dtype under a torch op: bool as bytes (sum and
// max are "or", product and min "and"), complex as pairs of reals (sums
// only), PREMUL_SUM as a sum with a prescale.
struct Reduction {
  ringlet::DataType dtype;
  ringlet::ReduceOp op;
  double prescale = 1.0;
  int64_t parts = 1;  // Ringlet elements per torch element (2: complex)
};
// Or NotImplementedError naming `what`, the op and the dtype.
Reduction resolve(at::ScalarType type, const c10d::ReduceOp& op, const char* what);
// A contiguous tensor as Ringlet reduces it: `rows` equal rows (> 1: for a
// reduce-scatter), else one dimension.
ringlet::Tensor as_reduced(const at::Tensor& contiguous, const Reduction& r, int64_t rows);

// Writes `bytes` bytes from `src` into `dst`, whatever its strides.
void copy_into(at::Tensor& dst, const std::byte* src, size_t bytes);
// The caller's tensor, contiguous: itself, or a copy whose result goes back.
at::Tensor staged(const at::Tensor& t);

}  // namespace ringlet::torch_c10d
