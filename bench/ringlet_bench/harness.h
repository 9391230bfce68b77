// The measuring loop: for each size, out of place then in place, warm up,
// then time -n ops, each on freshly written inputs, and combine the times
// across ranks. One backend: mean per op (nccl-tests' way). Several: they
// alternate op by op in the same processes, a barrier before each timed op,
// and the time is the median over iterations of the slowest rank's op — on a
// noisy shared machine this is the comparison that is fair to both.
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
  double wrong = 0;    // wrong elements summed over ranks; 0 when not checked
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
};

// Runs the sweep on every backend (alternating when more than one). on_row
// is called on every rank as each row of a single-backend run completes.
std::vector<Table> run_sweep(const Options& options, const std::vector<Backend*>& backends,
                             const std::function<void(const Row&)>& on_row);

}  // namespace ringlet::bench
