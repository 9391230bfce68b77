#include "checker.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "reference.h"

namespace soak {
namespace {

// Elements [first, first + n) of a buffer of dtype t, as doubles.
void load_values(DataType t, const void* p, uint64_t first, size_t n, double* out) {
  for (size_t i = 0; i < n; ++i) out[i] = load(t, p, first + i);
}

constexpr size_t kChunk = 4096;

}  // namespace

void Checker::note(const Collective& c, int64_t batch, const std::string& what) {
  // The first few wrong elements are enough to start from; the count tells the rest.
  if (notes_++ >= 20) return;
  std::string names;
  for (const auto& n : c.names) names += (names.empty() ? "" : ",") + n;
  std::fprintf(stderr,
               "soak rank %d: batch %" PRId64 " %s%s '%s' set %d dtype %s op %s rows0 %" PRId64
               " width %" PRId64 ": %s\n",
               rank_, batch, c.synchronous ? "blocking " : "", to_string(c.kind), names.c_str(),
               c.set, std::string(ringlet::to_string(c.dtype)).c_str(),
               std::string(ringlet::to_string(c.op)).c_str(), c.rows.empty() ? 0 : c.rows[0],
               c.width, what.c_str());
}

void Checker::fold_plan(const Collective& c) {
  digest_.add(static_cast<uint64_t>(c.kind) | uint64_t{c.synchronous} << 8 |
              static_cast<uint64_t>(c.dtype) << 16 | static_cast<uint64_t>(c.op) << 24 |
              static_cast<uint64_t>(c.set) << 32);
  digest_.add(c.seed);
  for (int64_t r : c.rows) digest_.add(static_cast<uint64_t>(r));
  for (const auto& n : c.names) digest_.add(n.data(), n.size());
}

void Checker::compare(const Live& l, int tensor, const void* out, uint64_t elements, int64_t batch) {
  const Collective& c = *l.c;
  const Expected x(c, tensor, rank_);
  if (elements != x.elements) {
    note(c, batch, "returned " + std::to_string(elements) + " elements, expected " +
                       std::to_string(x.elements));
    totals_.wrong += static_cast<int64_t>(std::max(elements, x.elements));
    return;
  }
  int64_t wrong = 0;
  std::vector<double> want(kChunk), got(kChunk);
  for (uint64_t first = 0; first < elements; first += kChunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, elements - first));
    x.values(first, n, want.data());
    load_values(c.dtype, out, first, n, got.data());
    for (size_t i = 0; i < n; ++i) {
      if (close_enough(c, want[i], got[i])) continue;
      if (wrong++ < 3) {
        note(c, batch, "tensor " + std::to_string(tensor) + " element " +
                           std::to_string(first + i) + " is " + std::to_string(got[i]) +
                           ", expected " + std::to_string(want[i]));
      }
    }
  }
  totals_.wrong += wrong;
  totals_.bytes_checked += static_cast<int64_t>(elements * ringlet::dtype_size(c.dtype));
  // Results every rank of the world shares enter the checksum the ranks compare.
  const bool shared = c.set == 0 && (c.kind == Kind::kAllreduce ||
                                     c.kind == Kind::kGroupedAllreduce ||
                                     c.kind == Kind::kAllgather || c.kind == Kind::kBroadcast);
  if (shared) digest_.add(out, elements * ringlet::dtype_size(c.dtype));
}

// An input given out of place must come back as it went in.
void Checker::input_untouched(const Live& l, int tensor, int64_t batch) {
  const Collective& c = *l.c;
  const int me = c.index_of(rank_);
  uint64_t elements = 0;
  switch (c.kind) {
    case Kind::kAllreduce:
    case Kind::kGroupedAllreduce:
      elements = static_cast<uint64_t>(c.rows[static_cast<size_t>(tensor)] * c.width);
      break;
    case Kind::kAllgather:
    case Kind::kAlltoall: elements = static_cast<uint64_t>(c.rows_of(me) * c.width); break;
    case Kind::kReducescatter: {
      int64_t rows = 0;
      for (int64_t r : c.rows) rows += r;
      elements = static_cast<uint64_t>((c.synchronous ? rows : c.rows[0]) * c.width);
      break;
    }
    default: return;
  }
  int64_t wrong = 0;
  const void* in = l.inputs[static_cast<size_t>(tensor)].data();
  std::vector<double> want(kChunk), got(kChunk);
  for (uint64_t first = 0; first < elements; first += kChunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, elements - first));
    input_values(c, tensor, rank_, first, n, want.data());
    load_values(c.dtype, in, first, n, got.data());
    for (size_t i = 0; i < n; ++i) wrong += want[i] != got[i];
  }
  if (wrong) note(c, batch, std::to_string(wrong) + " input elements changed (out of place)");
  totals_.wrong += wrong;
  totals_.bytes_checked += static_cast<int64_t>(elements * ringlet::dtype_size(c.dtype));
}

void Checker::check(const Live& l, int64_t batch) {
  const Collective& c = *l.c;
  ++totals_.collectives;
  switch (c.kind) {
    case Kind::kBarrier: return;
    case Kind::kAllreduce:
    case Kind::kGroupedAllreduce:
      for (size_t t = 0; t < c.rows.size(); ++t) {
        const auto& out = c.in_place ? l.inputs[t] : l.outputs[t];
        compare(l, static_cast<int>(t), out.data(), static_cast<uint64_t>(c.rows[t] * c.width),
                batch);
        if (!c.in_place) input_untouched(l, static_cast<int>(t), batch);
      }
      totals_.collectives += static_cast<int64_t>(c.rows.size()) - 1;
      return;
    case Kind::kBroadcast:
      compare(l, 0, l.inputs[0].data(), static_cast<uint64_t>(c.rows[0] * c.width), batch);
      return;
    default: break;
  }
  input_untouched(l, 0, batch);
  const size_t es = ringlet::dtype_size(c.dtype);
  const Expected x(c, 0, rank_);
  if (c.synchronous) {
    compare(l, 0, l.outputs[0].data(), x.elements, batch);
    return;
  }
  const ringlet::Result& r = l.results[0];
  if (r.shape != x.shape) {
    note(c, batch, "the result's shape is not the expected one");
    ++totals_.wrong;
  }
  if (c.kind == Kind::kAlltoall && r.received_splits != x.received_splits) {
    note(c, batch, "received_splits are not the senders' splits");
    ++totals_.wrong;
  }
  compare(l, 0, r.data.data(), r.data.size() / es, batch);
}

}  // namespace soak
