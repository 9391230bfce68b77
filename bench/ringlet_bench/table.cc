// The table reproduces nccl-tests' layout (columns, widths, units, the
// summary lines) so that scripts that parse its output parse this one. The
// per-op percentiles come after nccl-tests' columns, so that a script that
// counts columns from the left reads what it always read.
#include "table.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace ringlet::bench {
namespace {

bool has_op(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kReducescatter;
}
bool has_root(Collective c) { return c == Collective::kBroadcast; }

// With --tensors N: "sum_async_Nx", so that rows of different N stay distinct.
std::string redop_name(const Options& o) {
  std::string name = has_op(o.collective) ? std::string(to_string(o.op)) : "none";
  if (o.tensors > 0) name += "_async_" + std::to_string(o.tensors) + "x";
  return name;
}

// Bytes one iteration moves: the row's size, times the tensors per iteration.
size_t iteration_bytes(const Options& o, size_t bytes) {
  return o.tensors > 0 ? bytes * static_cast<size_t>(o.tensors) : bytes;
}
int root_column(const Options& o) { return has_root(o.collective) ? o.root : -1; }

double algbw_gbps(size_t bytes, double time_us) {
  return time_us > 0 ? static_cast<double>(bytes) / time_us / 1e3 : 0;
}

// nccl-tests prints times with fewer decimals as they grow, in 7 columns.
std::string format_time(double us) {
  char text[32];
  std::snprintf(text, sizeof text, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
  return text;
}

std::string format_wrong(const Options& o, double wrong) {
  if (!o.check) return "N/A";
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", wrong);
  return text;
}

double avg_busbw(const Options& o, const Table& t, int nranks, Collective c) {
  double sum = 0;
  size_t n = 0;
  for (const Row& r : t.rows) {
    for (const Measurement* m : {&r.out_of_place, &r.in_place}) {
      sum += algbw_gbps(iteration_bytes(o, r.layout.bytes), m->time_us) * bus_factor(c, nranks);
      ++n;
    }
  }
  return n ? sum / static_cast<double>(n) : 0;
}

std::string time_method(const Options& o) {
  std::string method = o.alternating()
                           ? "median per-op time (max over ranks), backends alternating op by op"
                           : "mean per-op time over iterations (nccl-tests), -a " + std::to_string(o.average);
  method += "; p50/p90/p99 of each op's time at its slowest rank";
  if (!o.alternating()) method += o.per_op_barrier ? ", a barrier before each op" : ", ops back to back";
  return method;
}

}  // namespace

double bus_factor(Collective c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Collective::kAllreduce: return 2 * (n - 1) / n;
    case Collective::kBroadcast: return 1;
    case Collective::kAllgather:
    case Collective::kReducescatter:
    case Collective::kAlltoall: return (n - 1) / n;
  }
  return 1;
}

void print_preamble(const Options& o, int nranks, const std::vector<std::string>& ranks) {
  std::string step = o.step_factor > 1 ? std::to_string(o.step_factor) + "(factor)"
                                       : std::to_string(o.step_bytes) + "(bytes)";
  std::string backends;
  for (BackendKind b : o.backends) backends += (backends.empty() ? "" : ",") + std::string(to_string(b));
  std::printf("# ringlet-bench %s  nranks %d minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d "
              "validation: %d\n",
              std::string(to_string(o.collective)).c_str(), nranks, o.min_bytes, o.max_bytes, step.c_str(),
              o.warmup_iters, o.iters, o.check ? 1 : 0);
  if (o.cuda) backends = "ringlet (HOROVOD_GPU_OPERATIONS=" + o.gpu_operations + ")";
  std::printf("# backend: %s  transport: %s  device: %s\n", backends.c_str(),
              o.transport.empty() ? "(RINGLET_TRANSPORT or auto)" : o.transport.c_str(),
              o.cuda ? "cuda" : "cpu");
  std::printf("# time: %s\n", time_method(o).c_str());
  std::printf("#\n# Using devices\n");
  for (size_t r = 0; r < ranks.size(); ++r) std::printf("#  Rank %2zu %s\n", r, ranks[r].c_str());
  std::printf("#\n");
  std::fflush(stdout);
}

void print_table_header(const Options& o, const std::string& backend) {
  if (o.alternating()) std::printf("# backend: %s\n", backend.c_str());
  std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
              "         out-of-place                 in-place         \n",
              "", "", "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s  %7s  %7s  %7s  %7s  %7s  %7s\n",
              "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
              "busbw", "#wrong", "p50", "p90", "p99", "p50", "p90", "p99");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s  %7s  %7s  %7s  %7s  %7s  %7s\n",
              "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
              "(us)", "(us)", "(us)", "(us)", "(us)", "(us)");
  std::fflush(stdout);
}

void print_row(const Options& o, int nranks, const Row& row) {
  std::printf("%12zu  %12zu  %8s  %6s  %6d", row.layout.bytes, row.layout.count,
              std::string(to_string(o.dtype)).c_str(), redop_name(o).c_str(), root_column(o));
  for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
    const double algbw = algbw_gbps(iteration_bytes(o, row.layout.bytes), m->time_us);
    std::printf("  %7s  %6.2f  %6.2f  %5s", format_time(m->time_us).c_str(), algbw,
                algbw * bus_factor(o.collective, nranks), format_wrong(o, m->wrong).c_str());
  }
  for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
    std::printf("  %7s  %7s  %7s", format_time(m->p50_us).c_str(), format_time(m->p90_us).c_str(),
                format_time(m->p99_us).c_str());
  }
  std::printf("\n");
  std::fflush(stdout);
}

void print_local_check(const Options& o, int rank, const std::vector<Table>& tables) {
  if (!o.check) return;
  for (const Table& t : tables) {
    std::printf("# rank %d checked %s: %zu elements, %zu wrong\n", rank, t.impl.c_str(), t.local.checked,
                t.local.wrong);
  }
  std::fflush(stdout);
}

void print_table_footer(const Options& o, int nranks, const Table& t) {
  double wrong = 0;
  for (const Row& r : t.rows) wrong += r.out_of_place.wrong + r.in_place.wrong;
  std::printf("# Out of bounds values : %.0f %s\n", wrong, wrong > 0 ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g \n#\n", avg_busbw(o, t, nranks, o.collective));
  std::fflush(stdout);
}

void print_comparison(const Options& o, const std::vector<Table>& tables) {
  if (tables.size() < 2) return;
  const Table& a = tables[0];
  const Table& b = tables[1];
  std::printf("# %s vs %s: median per-op time (us), speedup = %s time / %s time; then each one's p90 "
              "and p99 (us)\n",
              a.backend.c_str(), b.backend.c_str(), b.backend.c_str(), a.backend.c_str());
  const std::string a_p90 = a.backend + " p90", a_p99 = a.backend + " p99";
  const std::string b_p90 = b.backend + " p90", b_p99 = b.backend + " p99";
  std::printf("# %10s  %12s  %10s  %10s  %8s  %10s  %10s  %10s  %10s\n", "size", "placement",
              a.backend.c_str(), b.backend.c_str(), "speedup", a_p90.c_str(), a_p99.c_str(), b_p90.c_str(),
              b_p99.c_str());
  for (size_t i = 0; i < a.rows.size() && i < b.rows.size(); ++i) {
    for (bool in_place : {false, true}) {
      const Measurement& ma = in_place ? a.rows[i].in_place : a.rows[i].out_of_place;
      const Measurement& mb = in_place ? b.rows[i].in_place : b.rows[i].out_of_place;
      std::printf("  %10zu  %12s  %10.2f  %10.2f  %8.2f  %10.2f  %10.2f  %10.2f  %10.2f\n",
                  a.rows[i].layout.bytes, in_place ? "in-place" : "out-of-place", ma.time_us, mb.time_us,
                  ma.time_us > 0 ? mb.time_us / ma.time_us : 0.0, ma.p90_us, ma.p99_us, mb.p90_us,
                  mb.p99_us);
    }
  }
  (void)o;
  std::fflush(stdout);
}

void write_csv(const std::string& path, const Options& o, int nranks, const std::vector<Table>& tables) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write --csv file " + path);
  out << kCsvHeader << "\n";
  for (const Table& t : tables) {
    for (bool in_place : {false, true}) {
      for (const Row& r : t.rows) {
        const Measurement& m = in_place ? r.in_place : r.out_of_place;
        const double algbw = algbw_gbps(iteration_bytes(o, r.layout.bytes), m.time_us);
        char line[256];
        std::snprintf(line, sizeof line, "%s%s,%d,%zu,%s,%s,%.3f,%.6f,%.6f,%.0f,%.3f,%.3f,%.3f\n", t.impl.c_str(),
                      in_place ? "-inplace" : "", nranks, r.layout.bytes,
                      std::string(to_string(o.dtype)).c_str(), redop_name(o).c_str(), m.time_us, algbw,
                      algbw * bus_factor(o.collective, nranks), m.wrong, m.p50_us, m.p90_us,
                      m.p99_us);
        out << line;
      }
    }
  }
  if (!out.flush()) throw std::runtime_error("writing --csv file " + path + " failed");
}

void write_json(const std::string& path, const Options& o, int nranks, const std::vector<Table>& tables) {
  nlohmann::json doc;
  doc["collective"] = to_string(o.collective);
  doc["nranks"] = nranks;
  doc["datatype"] = to_string(o.dtype);
  doc["redop"] = redop_name(o);
  doc["root"] = root_column(o);
  doc["iters"] = o.iters;
  doc["warmup_iters"] = o.warmup_iters;
  doc["check"] = o.check;
  doc["per_op_barrier"] = o.per_op_barrier || o.alternating();
  doc["time"] = o.alternating() ? "median" : "mean";
  doc["tables"] = nlohmann::json::array();
  for (const Table& t : tables) {
    nlohmann::json jt;
    jt["backend"] = t.backend;
    jt["rows"] = nlohmann::json::array();
    for (const Row& r : t.rows) {
      nlohmann::json jr{{"size", r.layout.bytes}, {"count", r.layout.count}};
      for (bool in_place : {false, true}) {
        const Measurement& m = in_place ? r.in_place : r.out_of_place;
        const double algbw = algbw_gbps(iteration_bytes(o, r.layout.bytes), m.time_us);
        nlohmann::json jm{{"time_us", m.time_us},
                          {"p50_us", m.p50_us},
                          {"p90_us", m.p90_us},
                          {"p99_us", m.p99_us},
                          {"algbw_GBps", algbw},
                          {"busbw_GBps", algbw * bus_factor(o.collective, nranks)}};
        if (o.check) jm["wrong"] = static_cast<int64_t>(m.wrong);
        jr[in_place ? "in_place" : "out_of_place"] = jm;
      }
      jt["rows"].push_back(jr);
    }
    jt["avg_busbw_GBps"] = avg_busbw(o, t, nranks, o.collective);
    doc["tables"].push_back(jt);
  }
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write -J file " + path);
  out << doc.dump(2) << "\n";
  if (!out.flush()) throw std::runtime_error("writing -J file " + path + " failed");
}

double total_wrong(const std::vector<Table>& tables) {
  double wrong = 0;
  for (const Table& t : tables) {
    for (const Row& r : t.rows) wrong += r.out_of_place.wrong + r.in_place.wrong;
    wrong += static_cast<double>(t.local.wrong);  // this rank's own count, whatever the combined says
  }
  return wrong;
}

}  // namespace ringlet::bench
