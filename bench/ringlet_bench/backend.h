// A backend runs the benchmarked collectives (Ringlet's ring, or MPI as the
// baseline) and the few untimed helpers the harness needs across ranks.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "check.h"
#include "options.h"

namespace ringlet::bench {

enum class Combine { kSum, kMin, kMax };

class Backend {
 public:
  virtual ~Backend() = default;
  // "ring" or "mpi" (the --backend name); impl() is the CSV's name.
  virtual std::string_view name() const = 0;
  virtual std::string_view impl() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // One collective of case `c` on the buffers op_buffers(c, ...) gives.
  // `send_buf` is the out-of-place input allocation (broadcast's root copies
  // from it when not in place).
  virtual void run(const Case& c, const OpBuffers& b, const void* send_buf) = 0;
  // Untimed, after each run(): a backend whose output lands elsewhere (device
  // collectives whose output the runtime allocates) moves it into b.recv
  // when `deliver` (the op is checked), and lets go of it either way.
  virtual void collect(const Case&, const OpBuffers&, bool /*deliver*/) {}
  virtual void barrier() = 0;

  // Untimed: elementwise over ranks, result on every rank.
  virtual void combine(std::span<double> values, Combine how) = 0;
  // Untimed: every rank's `mine` (padded to `width` bytes), in rank order.
  virtual std::vector<std::string> gather_strings(const std::string& mine, size_t width) = 0;
};

// Initializes Ringlet (ringlet::init) and shuts it down when destroyed. With
// options.tensors > 0 an allreduce op is that many named tensors through the
// asynchronous API, in an order shuffled per rank and per iteration.
std::unique_ptr<Backend> make_ringlet_backend(const Options& options);
// Uses MPI_COMM_WORLD; MPI must be initialized (see MpiRuntime). Throws when
// the dtype has no MPI equivalent or this build has no MPI.
std::unique_ptr<Backend> make_mpi_backend(const Options& options);

// Owns MPI's lifetime for the benchmark when an MPI backend is asked for:
// initialized before Ringlet so that Ringlet bootstraps through it, finalized
// after Ringlet shut down.
class MpiRuntime {
 public:
  explicit MpiRuntime(bool needed);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

 private:
  bool owned_ = false;
};

}  // namespace ringlet::bench
