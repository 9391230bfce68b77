#include "check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "codec.h"

namespace ringlet::bench {
namespace {

// Never produced by the inputs below (copies are < 64) and held by every dtype.
constexpr double kSentinel = 100;

// The reduction input of rank r at index i. Bounded so that n ranks' sum
// (<= 7n), product (<= 2^ceil(n/3)) and extremes stay exact in int8 up to
// 16 ranks and in bfloat16 beyond that.
double reduce_input(ReduceOp op, int r, size_t i) {
  switch (op) {
    case ReduceOp::kProd: return (static_cast<size_t>(r) + i) % 3 == 0 ? 2 : 1;
    case ReduceOp::kMin:
    case ReduceOp::kMax: return static_cast<double>((static_cast<size_t>(r) * 5 + i * 3) % 32);
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return static_cast<double>((static_cast<size_t>(r) * 3 + i) % 8);
  }
  return 0;
}

// What rank `src` sends to rank `dst` at index i in a copy collective.
double copy_input(int src, int dst, size_t i) {
  return static_cast<double>((static_cast<size_t>(src) * 11 + static_cast<size_t>(dst) * 5 + i) % 64);
}

double reduce_expected(const Case& c, size_t i) {
  double acc = reduce_input(c.op, 0, i);
  for (int r = 1; r < c.nranks; ++r) {
    double v = reduce_input(c.op, r, i);
    switch (c.op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += v; break;
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
    }
  }
  // Integers: the sum times 1/n in double, truncated toward zero (Horovod's rule).
  if (c.op == ReduceOp::kAvg) {
    acc = is_floating(c.dtype) ? acc / c.nranks : std::trunc(acc * (1.0 / c.nranks));
  }
  return acc;
}

// avg of floats is sum x (1/n), which need not be the exactly rounded
// quotient; everything else is exact.
bool matches(const Case& c, double got, double want) {
  if (got == want) return true;
  if (c.op != ReduceOp::kAvg || !is_floating(c.dtype)) return false;
  double tol = 0;
  switch (c.dtype) {
    case DataType::kFloat16: tol = 0x1p-9; break;
    case DataType::kBFloat16: tol = 0x1p-6; break;
    case DataType::kFloat32: tol = 0x1p-20; break;
    default: tol = 0x1p-45; break;
  }
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

void fill_sentinel(DataType t, void* buf, size_t n) {
  for (size_t i = 0; i < n; ++i) store(t, buf, i, kSentinel);
}

// One rank's input, written at `dst`.
void fill_input(const Case& c, void* dst) {
  const Layout& l = c.layout;
  switch (c.collective) {
    case Collective::kAllreduce:
      for (size_t i = 0; i < l.count; ++i) store(c.dtype, dst, i, reduce_input(c.op, c.rank, i));
      break;
    case Collective::kReducescatter:
      for (size_t i = 0; i < l.send_elems; ++i) store(c.dtype, dst, i, reduce_input(c.op, c.rank, i));
      break;
    case Collective::kBroadcast:
      for (size_t i = 0; i < l.count; ++i) store(c.dtype, dst, i, copy_input(c.root, 0, i));
      break;
    case Collective::kAllgather:
      for (size_t i = 0; i < l.count; ++i) store(c.dtype, dst, i, copy_input(c.rank, 0, i));
      break;
    case Collective::kAlltoall:
      for (int b = 0; b < c.nranks; ++b) {
        for (size_t i = 0; i < l.count; ++i) {
          store(c.dtype, dst, b * l.count + i, copy_input(c.rank, b, i));
        }
      }
      break;
  }
}

char* offset(void* buf, size_t elems, DataType t) { return static_cast<char*>(buf) + elems * dtype_size(t); }

}  // namespace

Layout layout_for(Collective c, size_t bytes, DataType dtype, int nranks) {
  const size_t elems = bytes / dtype_size(dtype);
  const size_t n = static_cast<size_t>(nranks);
  Layout l;
  switch (c) {
    case Collective::kAllreduce:
    case Collective::kBroadcast:
      l.count = l.send_elems = l.recv_elems = elems;
      break;
    case Collective::kAllgather:
      l.count = elems / n;
      l.send_elems = l.count;
      l.recv_elems = l.count * n;
      break;
    case Collective::kReducescatter:
      l.count = elems / n;
      l.send_elems = l.count * n;
      l.recv_elems = l.count;
      break;
    case Collective::kAlltoall:
      l.count = elems / n;
      l.send_elems = l.recv_elems = l.count * n;
      break;
  }
  l.bytes = l.inplace_elems() * dtype_size(dtype);
  return l;
}

OpBuffers op_buffers(const Case& c, void* send_buf, void* recv_buf) {
  if (!c.in_place) return {send_buf, recv_buf};
  if (c.collective == Collective::kAllgather) {
    return {offset(recv_buf, static_cast<size_t>(c.rank) * c.layout.count, c.dtype), recv_buf};
  }
  return {recv_buf, recv_buf};
}

void prepare(const Case& c, void* send_buf, void* recv_buf) {
  const Layout& l = c.layout;
  fill_sentinel(c.dtype, recv_buf, c.in_place ? l.inplace_elems() : l.recv_elems);
  const bool has_input = c.collective != Collective::kBroadcast || c.rank == c.root;
  if (!has_input) return;
  OpBuffers b = op_buffers(c, send_buf, recv_buf);
  fill_input(c, const_cast<void*>(b.send));
}

CheckCount check_output(const Case& c, const void* recv_buf) {
  const Layout& l = c.layout;
  CheckCount counted;
  auto expect = [&](size_t index, double want) {
    ++counted.checked;
    if (!matches(c, load(c.dtype, recv_buf, index), want)) ++counted.wrong;
  };
  switch (c.collective) {
    case Collective::kAllreduce:
      for (size_t i = 0; i < l.count; ++i) expect(i, reduce_expected(c, i));
      break;
    case Collective::kReducescatter: {
      const size_t first = static_cast<size_t>(c.rank) * l.count;
      for (size_t i = 0; i < l.count; ++i) expect(i, reduce_expected(c, first + i));
      break;
    }
    case Collective::kBroadcast:
      for (size_t i = 0; i < l.count; ++i) expect(i, copy_input(c.root, 0, i));
      break;
    case Collective::kAllgather:
      for (int b = 0; b < c.nranks; ++b) {
        for (size_t i = 0; i < l.count; ++i) expect(b * l.count + i, copy_input(b, 0, i));
      }
      break;
    case Collective::kAlltoall:
      for (int b = 0; b < c.nranks; ++b) {
        for (size_t i = 0; i < l.count; ++i) expect(b * l.count + i, copy_input(b, c.rank, i));
      }
      break;
  }
  return counted;
}

void divide_by(DataType dtype, void* buf, size_t count, int n) {
  const double inverse = 1.0 / n;
  for (size_t i = 0; i < count; ++i) {
    double v = load(dtype, buf, i);
    store(dtype, buf, i, is_floating(dtype) ? v * inverse : std::trunc(v * inverse));
  }
}

}  // namespace ringlet::bench
