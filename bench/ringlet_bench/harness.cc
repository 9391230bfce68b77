#include "harness.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "device_buffers.h"
#include "percentile.h"
#include "ringlet/ringlet.h"

namespace ringlet::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Page-aligned, touched once at allocation so that first-touch page faults
// never land in a timed op.
class Buffer {
 public:
  explicit Buffer(size_t bytes) : bytes_(std::max<size_t>(bytes, 64)) {
    data_ = std::aligned_alloc(4096, (bytes_ + 4095) / 4096 * 4096);
    if (!data_) throw std::bad_alloc();
    std::memset(data_, 0, bytes_);
  }
  ~Buffer() { std::free(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return data_; }

 private:
  size_t bytes_;
  void* data_;
};

double elapsed_us(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

struct Buffers {
  Buffer send;
  Buffer recv;
  std::unique_ptr<DeviceBuffers> device;  // --device cuda
};

// The largest allocation any size of the sweep needs.
Buffers allocate(const Options& o, int nranks) {
  size_t send = 0, recv = 0;
  for (size_t bytes : o.sizes()) {
    Layout l = layout_for(o.collective, bytes, o.dtype, nranks);
    send = std::max(send, l.send_elems * dtype_size(o.dtype));
    recv = std::max(recv, l.inplace_elems() * dtype_size(o.dtype));
  }
  return Buffers{Buffer(send), Buffer(recv),
                 o.cuda ? make_device_buffers(ringlet::local_rank(), send, recv) : nullptr};
}

// One timed op on fresh inputs; checks this rank's output when `check` is
// given, adding to it.
double timed_op(Backend& be, const Case& c, Buffers& buf, bool barrier, LocalCheck* check) {
  prepare(c, buf.send.get(), buf.recv.get());
  void* send = buf.send.get();
  void* recv = buf.recv.get();
  const size_t es = dtype_size(c.dtype);
  if (buf.device) {
    buf.device->upload(send, c.layout.send_elems * es, recv, c.layout.inplace_elems() * es);
    send = buf.device->send();
    recv = buf.device->recv();
  }
  OpBuffers ob = op_buffers(c, send, recv);
  if (buf.device) ob.device = buf.device->device();
  if (barrier) be.barrier();
  const auto start = Clock::now();
  be.run(c, ob, send);
  const double us = elapsed_us(start);
  be.collect(c, ob, check != nullptr);
  if (check != nullptr) {
    if (buf.device) buf.device->download(buf.recv.get(), c.layout.inplace_elems() * es);
    const CheckCount counted = check_output(c, buf.recv.get());
    check->checked += counted.checked;
    check->wrong += counted.wrong;
  }
  return us;
}

// p50, p90 and p99 of per-op times, each op counted at its slowest rank.
void set_percentiles(Backend& be, std::vector<double> times, Measurement& m) {
  be.combine(times, Combine::kMax);  // an op lasts until its slowest rank is done
  m.p50_us = percentile(times, 50);
  m.p90_us = percentile(times, 90);
  m.p99_us = percentile(times, 99);
}

// nccl-tests' -a: how one number stands for all ranks' mean times.
double across_ranks(Backend& be, double mine, int average) {
  double v[1] = {mine};
  switch (average) {
    case 0: return mine;  // rank 0's own (only rank 0 prints)
    case 2: be.combine(v, Combine::kMin); return v[0];
    case 3: be.combine(v, Combine::kMax); return v[0];
    default: be.combine(v, Combine::kSum); return v[0] / be.size();
  }
}

double wrong_over_ranks(Backend& be, double mine) {
  double v[1] = {mine};
  be.combine(v, Combine::kSum);
  return v[0];
}

Measurement measure_one(const Options& o, Backend& be, const Case& c, Buffers& buf,
                        LocalCheck& local) {
  const bool barrier = o.per_op_barrier;
  for (int w = 0; w < o.warmup_iters; ++w) timed_op(be, c, buf, barrier, nullptr);
  std::vector<double> times(static_cast<size_t>(o.iters));
  LocalCheck mine;
  double total = 0;
  for (int it = 0; it < o.iters; ++it) {
    const bool check = o.check && it == o.iters - 1;
    times[static_cast<size_t>(it)] = timed_op(be, c, buf, barrier, check ? &mine : nullptr);
    total += times[static_cast<size_t>(it)];
  }
  Measurement m;
  m.time_us = across_ranks(be, total / o.iters, o.average);
  set_percentiles(be, std::move(times), m);
  m.wrong = wrong_over_ranks(be, static_cast<double>(mine.wrong));
  local.checked += mine.checked;
  local.wrong += mine.wrong;
  return m;
}

std::vector<Measurement> measure_alternating(const Options& o, const std::vector<Backend*>& bes,
                                             const Case& c, Buffers& buf,
                                             std::vector<LocalCheck>& local) {
  const size_t nb = bes.size();
  for (int w = 0; w < o.warmup_iters; ++w) {
    for (Backend* be : bes) timed_op(*be, c, buf, true, nullptr);
  }
  std::vector<std::vector<double>> times(nb, std::vector<double>(static_cast<size_t>(o.iters)));
  std::vector<LocalCheck> mine(nb);
  for (int it = 0; it < o.iters; ++it) {
    const bool check = o.check && it == o.iters - 1;
    for (size_t b = 0; b < nb; ++b) {
      times[b][static_cast<size_t>(it)] = timed_op(*bes[b], c, buf, true, check ? &mine[b] : nullptr);
    }
  }
  std::vector<Measurement> out(nb);
  for (size_t b = 0; b < nb; ++b) {
    set_percentiles(*bes[b], times[b], out[b]);
    out[b].time_us = out[b].p50_us;  // the median of the slowest rank's per-op times
    out[b].wrong = wrong_over_ranks(*bes[b], static_cast<double>(mine[b].wrong));
    local[b].checked += mine[b].checked;
    local[b].wrong += mine[b].wrong;
  }
  return out;
}

}  // namespace

std::vector<Table> run_sweep(const Options& o, const std::vector<Backend*>& backends,
                             const std::function<void(const Row&)>& on_row) {
  Backend& first = *backends.front();
  const int nranks = first.size();
  Buffers buf = allocate(o, nranks);
  std::vector<Table> tables;
  for (Backend* be : backends) tables.push_back(Table{std::string(be->name()), std::string(be->impl()), {}, {}});

  for (size_t bytes : o.sizes()) {
    Layout layout = layout_for(o.collective, bytes, o.dtype, nranks);
    if (layout.count == 0) continue;  // too small for one element per rank
    std::vector<Row> rows(backends.size(), Row{layout, {}, {}});
    for (bool in_place : {false, true}) {
      Case c{o.collective, o.dtype, o.op, o.root, first.rank(), nranks, layout, in_place};
      std::vector<Measurement> m;
      if (o.alternating()) {
        std::vector<LocalCheck> local(backends.size());
        m = measure_alternating(o, backends, c, buf, local);
        for (size_t b = 0; b < backends.size(); ++b) {
          tables[b].local.checked += local[b].checked;
          tables[b].local.wrong += local[b].wrong;
        }
      } else {
        m.push_back(measure_one(o, first, c, buf, tables[0].local));
      }
      for (size_t b = 0; b < backends.size(); ++b) {
        (in_place ? rows[b].in_place : rows[b].out_of_place) = m[b];
      }
    }
    for (size_t b = 0; b < backends.size(); ++b) tables[b].rows.push_back(rows[b]);
    if (!o.alternating() && on_row) on_row(rows[0]);
  }
  return tables;
}

}  // namespace ringlet::bench
