// Argument checks shared by the C++ API and (through it) the C ABI. Each
// throws an invalid-argument common::Failure whose cause names the argument
// and the offending value; the caller adds the call and the rank.
#pragma once

#include <cstddef>
#include <span>

#include "ringlet/types.h"

namespace ringlet::api {

void check_dtype(DataType dtype);
void check_op(ReduceOp op);
// A buffer may be null only when it holds no elements.
void check_buffer(const void* buffer, size_t count, const char* name);
// count elements of dtype must fit in size_t bytes.
void check_count(size_t count, DataType dtype, const char* name);
// One entry per rank; returns the sum, checked against size_t overflow in bytes.
size_t check_counts(std::span<const size_t> counts, int size, size_t elem_size, const char* name);
void check_root(int root, int size);

}  // namespace ringlet::api
