// The measuring loop: for each size, out of place then in place, warm up,
// then time -n ops, each on freshly written inputs, and combine the times
// across ranks. One backend: mean per op (nccl-tests' way). Several: they
// alternate op by op in the same processes, a barrier before each timed op,
// and the time is the median over iterations of the slowest rank's op — on a
// noisy shared machine this is the comparison that is fair to both.
//
// Every op is timed on its own (the clock is read around each op, as the mean
// needs anyway), so the distribution comes at no cost to the mean: p50, p90
// and p99 are over the iterations of each op's time on its slowest rank.
// Without --per-op-barrier a single backend runs its ops back to back, as
// training does, and an op's time includes waiting for ranks still finishing the one
// before; --per-op-barrier puts a barrier before each timed op (outside the
// timed region) to measure each op alone, which changes what the mean means.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend.h"
#include "check.h"
#include "options.h"

namespace ringlet::bench {

struct Measurement {
  double time_us = 0;  // as the table prints it (mean or median, see above)
  double p50_us = 0;   // percentiles of the per-op time (max over ranks) over iterations
  double p90_us = 0;
  double p99_us = 0;
  double wrong = 0;    // wrong elements summed over ranks; 0 when not checked
};

// This rank's own count of the elements it checked and found wrong, never
// combined through a backend: a check that cannot be fooled by the
// collective it measures.
struct LocalCheck {
  size_t checked = 0;
  size_t wrong = 0;
};

struct Row {
  Layout layout;
  Measurement out_of_place;
  Measurement in_place;
};

struct Table {
  std::string backend;  // "ring" / "mpi"
  std::string impl;     // the CSV's impl column
  std::vector<Row> rows;
  LocalCheck local;  // over every row and placement of this table
};

// Runs the sweep on every backend (alternating when more than one). on_row
// is called on every rank as each row of a single-backend run completes.
std::vector<Table> run_sweep(const Options& options, const std::vector<Backend*>& backends,
                             const std::function<void(const Row&)>& on_row);

}  // namespace ringlet::bench
