#include "validate.h"

#include <limits>
#include <string>

#include "ringlet/common/failure.h"

namespace ringlet::api {

void check_dtype(DataType dtype) {
  // The names of ringlet_dtype, in the order of their values.
  static_assert(kNumDataTypes == 10, "name every dtype below");
  if (!is_valid(dtype)) {
    throw common::caller_error("unknown dtype " + std::to_string(static_cast<int32_t>(dtype)) +
                               " (expected 0.." + std::to_string(kNumDataTypes - 1) +
                               ": float32, float64, float16, bfloat16, int8, uint8, int32, int64, "
                               "int16, uint16)");
  }
}

void check_op(ReduceOp op) {
  static_assert(kNumReduceOps == 5, "name every reduce op below");
  if (!is_valid(op)) {
    throw common::caller_error("unknown reduce op " + std::to_string(static_cast<int32_t>(op)) +
                               " (expected 0.." + std::to_string(kNumReduceOps - 1) +
                               ": sum, prod, min, max, avg)");
  }
}

void check_buffer(const void* buffer, size_t count, const char* name) {
  if (buffer == nullptr && count > 0) {
    throw common::caller_error(std::string(name) + " is null but holds " + std::to_string(count) +
                               " elements");
  }
}

void check_count(size_t count, DataType dtype, const char* name) {
  if (count > std::numeric_limits<size_t>::max() / dtype_size(dtype)) {
    throw common::caller_error(std::string(name) + " of " + std::to_string(count) +
                               " elements overflows size_t in bytes");
  }
}

size_t check_counts(std::span<const size_t> counts, int size, size_t elem_size, const char* name) {
  if (counts.data() == nullptr && size > 0) {
    throw common::caller_error(std::string(name) + " is null (it needs one entry per rank, " +
                               std::to_string(size) + ")");
  }
  if (counts.size() != static_cast<size_t>(size)) {
    throw common::caller_error(std::string(name) + " has " + std::to_string(counts.size()) +
                               " entries but the job has " + std::to_string(size) + " ranks");
  }
  const size_t max_elems = std::numeric_limits<size_t>::max() / (elem_size ? elem_size : 1);
  size_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] > max_elems - total) {
      throw common::caller_error(std::string(name) + " sums past the addressable size at rank " +
                                 std::to_string(r));
    }
    total += counts[r];
  }
  return total;
}

void check_root(int root, int size) {
  if (root < 0 || root >= size) {
    throw common::caller_error("root " + std::to_string(root) + " is out of range (the job has " +
                               std::to_string(size) + " ranks: 0.." + std::to_string(size - 1) +
                               ")");
  }
}

}  // namespace ringlet::api
