// Output: nccl-tests' header, table and summary lines on stdout (rank 0
// only), the CSV rows, the JSON file, and the ring-vs-mpi comparison.
#pragma once

#include <string>
#include <vector>

#include "harness.h"
#include "options.h"

namespace ringlet::bench {

// The CSV's columns; new ones are only ever appended.
inline constexpr const char* kCsvHeader =
    "impl,np,bytes,dtype,op,time_us,algbw_GBps,busbw_GBps,wrong,p50_us,p90_us,p99_us";

double bus_factor(Collective c, int nranks);

// Comment lines that describe the run and the ranks (one per rank).
void print_preamble(const Options& o, int nranks, const std::vector<std::string>& ranks);
void print_table_header(const Options& o, const std::string& backend);
void print_row(const Options& o, int nranks, const Row& row);
// Every rank, for every table: "# rank R checked IMPL: E elements, W wrong",
// this rank's own count (no collective involved), so that a reader can check
// each rank without trusting the combined #wrong.
void print_local_check(const Options& o, int rank, const std::vector<Table>& tables);
// "# Out of bounds values" and "# Avg bus bandwidth" for one table.
void print_table_footer(const Options& o, int nranks, const Table& t);
// The alternating run's last block: per size, both medians and the speedup.
void print_comparison(const Options& o, const std::vector<Table>& tables);

void write_csv(const std::string& path, const Options& o, int nranks, const std::vector<Table>& tables);
void write_json(const std::string& path, const Options& o, int nranks, const std::vector<Table>& tables);

// Wrong elements over every row, placement and table, plus this rank's own count.
double total_wrong(const std::vector<Table>& tables);

}  // namespace ringlet::bench
