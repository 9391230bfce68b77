// Output: nccl-tests' header, table and summary lines on stdout (rank 0
// only), the CSV rows, the JSON file, and the ring-vs-mpi comparison.
#pragma once

#include <string>
#include <vector>

#include "harness.h"
#include "options.h"

namespace ringlet::bench {

double bus_factor(Collective c, int nranks);

// Comment lines that describe the run and the ranks (one per rank).
void print_preamble(const Options& o, int nranks, const std::vector<std::string>& ranks);
void print_table_header(const Options& o, const std::string& backend);
void print_row(const Options& o, int nranks, const Row& row);
// "# Out of bounds values" and "# Avg bus bandwidth" for one table.
void print_table_footer(const Options& o, int nranks, const Table& t);
// The alternating run's last block: per size, both medians and the speedup.
void print_comparison(const Options& o, const std::vector<Table>& tables);

void write_csv(const std::string& path, const Options& o, int nranks, const std::vector<Table>& tables);
void write_json(const std::string& path, const Options& o, int nranks, const std::vector<Table>& tables);

// Wrong elements over every row, placement and table.
double total_wrong(const std::vector<Table>& tables);

}  // namespace ringlet::bench
