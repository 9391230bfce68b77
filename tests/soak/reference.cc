#include "reference.h"

#include <algorithm>
#include <cmath>

#include "values.h"

namespace soak {
namespace {

Range range_of(const Collective& c) {
  return value_range(c.dtype, reduces(c.kind) ? c.op : ReduceOp::kSum);
}

// An integer scaled as the library (and Horovod) scales it: in double, then
// toward zero.
double scale_integer(double v, double factor) {
  return factor == 1.0 ? v : std::trunc(v * factor);
}

// out[i] = op over members of (prescale * x_member[i]), scaled once by the
// postscale (divided by the members for an average), for elements [first,
// first + n). Integers in int64 (exact), floating types in double (exact but
// for an average's 1/n).
void reduce(const Collective& c, int tensor, uint64_t first, size_t n, double* out) {
  const bool floating = ringlet::is_floating(c.dtype);
  const int m = static_cast<int>(c.members.size());
  std::vector<double> x(n);
  std::vector<int64_t> acc(floating ? 0 : n);
  for (int i = 0; i < m; ++i) {
    input_values(c, tensor, c.members[static_cast<size_t>(i)], first, n, x.data());
    for (size_t e = 0; e < n; ++e) {
      const double v = floating ? x[e] * c.prescale : scale_integer(x[e], c.prescale);
      if (floating) {
        double& a = out[e];
        if (i == 0) {
          a = v;
        } else if (c.op == ReduceOp::kSum || c.op == ReduceOp::kAvg) {
          a += v;
        } else if (c.op == ReduceOp::kProd) {
          a *= v;
        } else if (c.op == ReduceOp::kMin) {
          a = std::min(a, v);
        } else {
          a = std::max(a, v);
        }
      } else {
        int64_t& a = acc[e];
        const auto iv = static_cast<int64_t>(v);
        if (i == 0) {
          a = iv;
        } else if (c.op == ReduceOp::kSum || c.op == ReduceOp::kAvg) {
          a += iv;
        } else if (c.op == ReduceOp::kProd) {
          a *= iv;
        } else if (c.op == ReduceOp::kMin) {
          a = std::min(a, iv);
        } else {
          a = std::max(a, iv);
        }
      }
    }
  }
  const double factor = c.op == ReduceOp::kAvg ? c.postscale / m : c.postscale;
  for (size_t e = 0; e < n; ++e) {
    if (floating) {
      out[e] *= factor;
    } else {
      out[e] = scale_integer(static_cast<double>(acc[e]), factor);
    }
  }
}

}  // namespace

uint64_t tensor_seed(const Collective& c, int tensor) {
  return mix(c.seed + static_cast<uint64_t>(tensor));
}

void input_values(const Collective& c, int tensor, int rank, uint64_t first, size_t n,
                  double* out) {
  const uint64_t seed = tensor_seed(c, tensor);
  const Range r = range_of(c);
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<double>(input_value(seed, rank, first + i, r));
  }
}

void fill_input(const Collective& c, int tensor, int rank, void* buf, size_t elements) {
  std::vector<double> v(std::min<size_t>(elements, 4096));
  for (size_t i = 0; i < elements; i += v.size()) {
    const size_t n = std::min(v.size(), elements - i);
    input_values(c, tensor, rank, i, n, v.data());
    for (size_t k = 0; k < n; ++k) store(c.dtype, buf, i + k, v[k]);
  }
}

Expected::Expected(const Collective& c, int tensor, int rank) : c_(c), tensor_(tensor) {
  const int me = c.index_of(rank);
  const int m = static_cast<int>(c.members.size());
  const int64_t w = c.width;
  int64_t rows = 0;
  switch (c.kind) {
    case Kind::kAllreduce:
    case Kind::kGroupedAllreduce:
      rows = c.kind == Kind::kAllreduce ? c.rows[0] : c.rows[static_cast<size_t>(tensor)];
      reduction_ = true;
      break;
    case Kind::kBroadcast:
      rows = c.rows[0];
      pieces_.push_back({0, c.root, 0});
      break;
    case Kind::kAllgather:
      // Members in ascending rank order, each its own rows.
      for (int i = 0; i < m; ++i) {
        pieces_.push_back({static_cast<uint64_t>(rows * w), c.members[static_cast<size_t>(i)], 0});
        rows += c.rows_of(i);
      }
      break;
    case Kind::kReducescatter: {
      // Asynchronous: Horovod's split of the rows. Blocking: recv_counts.
      int64_t offset = 0;
      for (int i = 0; i <= me; ++i) {
        const int64_t n =
            c.synchronous ? c.rows_of(i) : c.rows[0] / m + (i < c.rows[0] % m ? 1 : 0);
        if (i < me) offset += n;
        else rows = n;
      }
      reduction_ = true;
      reduce_from_ = static_cast<uint64_t>(offset * w);
      break;
    }
    case Kind::kAlltoall:
      // From each sender j, in member order: its rows for me, which start
      // after the rows it sends to the members before me.
      for (int j = 0; j < m; ++j) {
        const auto& s = c.splits[static_cast<size_t>(j)];
        int64_t before = 0;
        for (int k = 0; k < me; ++k) before += s[static_cast<size_t>(k)];
        pieces_.push_back({static_cast<uint64_t>(rows * w), c.members[static_cast<size_t>(j)],
                           static_cast<uint64_t>(before * w)});
        received_splits.push_back(s[static_cast<size_t>(me)]);
        rows += s[static_cast<size_t>(me)];
      }
      break;
    case Kind::kBarrier: break;
  }
  shape = {rows, w};
  elements = static_cast<uint64_t>(rows * w);
}

void Expected::values(uint64_t first, size_t n, double* out) const {
  if (n == 0) return;
  if (reduction_) {
    reduce(c_, tensor_, reduce_from_ + first, n, out);
    return;
  }
  // The pieces that cover [first, first + n), in order.
  auto it = std::upper_bound(pieces_.begin(), pieces_.end(), first,
                             [](uint64_t v, const Piece& p) { return v < p.at; });
  size_t done = 0;
  for (--it; done < n; ++it) {
    const uint64_t at = first + done;
    const uint64_t end = it + 1 == pieces_.end() ? elements : (it + 1)->at;
    if (at >= end) continue;  // an empty piece
    const size_t take = static_cast<size_t>(std::min<uint64_t>(end - at, n - done));
    input_values(c_, tensor_, it->rank, it->source + (at - it->at), take, out + done);
    done += take;
  }
}

bool close_enough(const Collective& c, double expected, double got) {
  if (expected == got) return true;
  if (!ringlet::is_floating(c.dtype) || c.op != ReduceOp::kAvg || !reduces(c.kind)) return false;
  // One rounding of the quotient to the dtype (and of 1/m), scaled by the
  // number of members for a division done before the sum.
  const double tolerance = unit_roundoff(c.dtype) * 2 * static_cast<double>(c.members.size()) *
                           std::max(std::fabs(expected), 1.0) * std::max(c.postscale, 1.0);
  return std::fabs(expected - got) <= tolerance;
}

}  // namespace soak
