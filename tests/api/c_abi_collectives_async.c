/* Every asynchronous collective of the C ABI as several ranks under
 * ringletrun (written for three; any count from 2 to 8 works): N-d
 * allreduce, allgather with uneven first dimensions (one rank contributing
 * none), broadcast from the last rank, reducescatter with an uneven split and
 * with Average, alltoall with explicit uneven splits (some empty) and with an
 * even split, and a grouped allreduce. Each rank submits them in its own
 * order and completes them in another; every element of every result is
 * checked, and so are the result's shape and received splits. Then shapes
 * with equal element counts but different dimensions fail as MISMATCH on
 * every rank. Exits non-zero, naming the rank, on the first failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringlet/ringlet_c.h"

enum { kMaxRanks = 8 };

static int g_rank = -1;
static int g_size = 0;

static void fail(const char* what, ringlet_status s) {
  fprintf(stderr, "c_abi_collectives_async rank %d: %s (status %d, %s): %s\n", g_rank, what, (int)s,
          ringlet_status_string(s), ringlet_last_error());
  exit(1);
}

static void check(ringlet_status s, const char* what) {
  if (s != RINGLET_OK) fail(what, s);
}

static void expect_element(int ok, const char* tensor, long i, double got, double want) {
  if (!ok) {
    fprintf(stderr, "c_abi_collectives_async rank %d: %s[%ld] is %g, expected %g\n", g_rank, tensor,
            i, got, want);
    exit(1);
  }
}

static void expect_shape(const ringlet_result* r, const char* tensor, int ndim,
                         const int64_t* want) {
  if (ringlet_result_ndim(r) != ndim) {
    fprintf(stderr, "c_abi_collectives_async rank %d: %s has %d dimensions, expected %d\n", g_rank,
            tensor, ringlet_result_ndim(r), ndim);
    exit(1);
  }
  const int64_t* got = ringlet_result_shape(r);
  for (int d = 0; d < ndim; ++d) {
    if (got[d] != want[d]) {
      fprintf(stderr, "c_abi_collectives_async rank %d: %s dimension %d is %lld, expected %lld\n",
              g_rank, tensor, d, (long long)got[d], (long long)want[d]);
      exit(1);
    }
  }
}

static void expect_bytes(const ringlet_result* r, const char* tensor, size_t want) {
  if (ringlet_result_bytes(r) != want) {
    fprintf(stderr, "c_abi_collectives_async rank %d: %s holds %zu bytes, expected %zu\n", g_rank,
            tensor, ringlet_result_bytes(r), want);
    exit(1);
  }
}

/* A per-rank permutation of 0..n-1 (Fisher-Yates over a small LCG). */
static void shuffle(int* order, int n, unsigned seed) {
  for (int i = 0; i < n; ++i) order[i] = i;
  for (int i = n - 1; i > 0; --i) {
    seed = seed * 1103515245u + 12345u;
    int j = (int)((seed >> 8) % (unsigned)(i + 1));
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}

/* The tensors, one per collective. */
enum {
  kAllreduce,
  kAllgather,
  kAllgatherSome,
  kBroadcast,
  kReducescatter,
  kReducescatterAvg,
  kAlltoall,
  kAlltoallEven,
  kGroup,
  kNumOps
};

/* allreduce [3, 4] int32 max */
static int32_t ar_in[3 * 4], ar_out[3 * 4];
/* allgather [r + 1, 3] int32; and [rows_some(r)] float64, rank 1 giving none */
static int32_t ag_in[kMaxRanks * 3];
static double ags_in[kMaxRanks + 2];
static int64_t rows_some(int r) { return r == 1 ? 0 : r + 2; }
/* broadcast [2, 5] float64 from the last rank */
static double bc[2 * 5];
/* reducescatter [2n + 1, 2] int32 sum; [n + 2] float32 average */
static int32_t rs_in[(2 * kMaxRanks + 1) * 2];
static float rsa_in[kMaxRanks + 2];
/* alltoall: rows_to(r, j) rows of [., 2] int64 from rank r to rank j; and an
 * even split of 2 int32 per rank */
static int64_t rows_to(int r, int j) { return (r + 2 * j) % 4; }
static int64_t a2a_in[kMaxRanks * 3 * 2];
static int32_t a2e_in[kMaxRanks * 2];
/* grouped: [4] and [2, 3] float32 sums with prescale 2 and postscale 0.5 */
static float g1_in[4], g1_out[4], g2_in[6], g2_out[6];

/* Horovod's reducescatter split: the i-th member's rows and first row. */
static int64_t rs_rows(int64_t d0, int i) { return d0 / g_size + (i < d0 % g_size ? 1 : 0); }
static int64_t rs_offset(int64_t d0, int i) {
  int64_t at = 0;
  for (int k = 0; k < i; ++k) at += rs_rows(d0, k);
  return at;
}

static void submit(int op, int64_t* handles) {
  const int r = g_rank, n = g_size;
  switch (op) {
    case kAllreduce: {
      const int64_t shape[2] = {3, 4};
      for (int i = 0; i < 12; ++i) ar_in[i] = (i * 7 + r * 5) % 11 - 3;
      check(ringlet_allreduce_async_ex("t.allreduce", ar_in, ar_out, shape, 2, RINGLET_INT32,
                                       RINGLET_MAX, 1.0, 1.0, 0, &handles[op]),
            "allreduce_async_ex");
      break;
    }
    case kAllgather: {
      const int64_t shape[2] = {r + 1, 3};
      for (int row = 0; row <= r; ++row) {
        for (int c = 0; c < 3; ++c) ag_in[row * 3 + c] = 1000 * r + 10 * row + c;
      }
      check(ringlet_allgather_async("t.allgather", ag_in, shape, 2, RINGLET_INT32, 0, &handles[op]),
            "allgather_async");
      break;
    }
    case kAllgatherSome: {
      const int64_t shape[1] = {rows_some(r)};
      for (int64_t k = 0; k < rows_some(r); ++k) ags_in[k] = r + 0.25 * (double)k;
      check(ringlet_allgather_async("t.allgather.some", ags_in, shape, 1, RINGLET_FLOAT64, 0,
                                    &handles[op]),
            "allgather_async with a rank giving no rows");
      break;
    }
    case kBroadcast: {
      const int64_t shape[2] = {2, 5};
      for (int i = 0; i < 10; ++i) bc[i] = r == n - 1 ? 0.5 * i : -1.0;
      check(ringlet_broadcast_async("t.broadcast", bc, shape, 2, RINGLET_FLOAT64, n - 1, 0,
                                    &handles[op]),
            "broadcast_async");
      break;
    }
    case kReducescatter: {
      const int64_t shape[2] = {2 * n + 1, 2};
      for (int i = 0; i < (2 * n + 1) * 2; ++i) rs_in[i] = i + r;
      check(ringlet_reducescatter_async("t.reducescatter", rs_in, shape, 2, RINGLET_INT32,
                                        RINGLET_SUM, 1.0, 1.0, 0, &handles[op]),
            "reducescatter_async");
      break;
    }
    case kReducescatterAvg: {
      const int64_t shape[1] = {n + 2};
      for (int i = 0; i < n + 2; ++i) rsa_in[i] = (float)(4 * i + 2 * r);
      check(ringlet_reducescatter_async("t.reducescatter.avg", rsa_in, shape, 1, RINGLET_FLOAT32,
                                        RINGLET_AVG, 1.0, 1.0, 0, &handles[op]),
            "reducescatter_async avg");
      break;
    }
    case kAlltoall: {
      int64_t splits[kMaxRanks], rows = 0;
      for (int j = 0; j < n; ++j) {
        splits[j] = rows_to(r, j);
        for (int64_t k = 0; k < splits[j]; ++k, ++rows) {
          for (int c = 0; c < 2; ++c) a2a_in[rows * 2 + c] = 10000 * r + 100 * j + 2 * k + c;
        }
      }
      const int64_t shape[2] = {rows, 2};
      check(ringlet_alltoall_async("t.alltoall", a2a_in, shape, 2, RINGLET_INT64, splits, n, 0,
                                   &handles[op]),
            "alltoall_async with splits");
      break;
    }
    case kAlltoallEven: {
      const int64_t shape[1] = {2 * n};
      for (int j = 0; j < n; ++j) {
        a2e_in[2 * j] = 100 * r + j;
        a2e_in[2 * j + 1] = -(100 * r + j);
      }
      check(ringlet_alltoall_async("t.alltoall.even", a2e_in, shape, 1, RINGLET_INT32, NULL, 0, 0,
                                   &handles[op]),
            "alltoall_async even");
      break;
    }
    case kGroup: {
      for (int i = 0; i < 4; ++i) g1_in[i] = (float)(r + i);
      for (int i = 0; i < 6; ++i) g2_in[i] = (float)(2 * r - i);
      const char* names[2] = {"t.group.a", "t.group.b"};
      const void* sends[2] = {g1_in, g2_in};
      void* recvs[2] = {g1_out, g2_out};
      const int64_t s1[1] = {4}, s2[2] = {2, 3};
      const int64_t* shapes[2] = {s1, s2};
      const int ndims[2] = {1, 2};
      /* Handles of the group land in handles[kGroup] and handles[kNumOps]. */
      int64_t two[2];
      check(ringlet_grouped_allreduce_async(2, names, sends, recvs, shapes, ndims, RINGLET_FLOAT32,
                                            RINGLET_SUM, 2.0, 0.5, 0, two),
            "grouped_allreduce_async");
      handles[kGroup] = two[0];
      handles[kNumOps] = two[1];
      break;
    }
  }
}

static void complete(int op, int64_t* handles) {
  const int r = g_rank, n = g_size;
  ringlet_result* res = NULL;
  switch (op) {
    case kAllreduce: {
      check(ringlet_synchronize_result(handles[op], &res), "synchronize allreduce");
      /* The output went to the caller's buffer: the result holds no data. */
      if (ringlet_result_data(res) != NULL || ringlet_result_bytes(res) != 0) {
        fail("an allreduce's result holds data", RINGLET_OK);
      }
      for (int i = 0; i < 12; ++i) {
        int32_t want = -100;
        for (int k = 0; k < n; ++k) {
          const int32_t v = (i * 7 + k * 5) % 11 - 3;
          if (v > want) want = v;
        }
        expect_element(ar_out[i] == want, "t.allreduce", i, ar_out[i], want);
      }
      break;
    }
    case kAllgather: {
      check(ringlet_synchronize_result(handles[op], &res), "synchronize allgather");
      const int64_t rows = (int64_t)n * (n + 1) / 2;
      const int64_t shape[2] = {rows, 3};
      expect_shape(res, "t.allgather", 2, shape);
      expect_bytes(res, "t.allgather", (size_t)rows * 3 * sizeof(int32_t));
      const int32_t* got = (const int32_t*)ringlet_result_data(res);
      long at = 0;
      for (int k = 0; k < n; ++k) {
        for (int row = 0; row <= k; ++row) {
          for (int c = 0; c < 3; ++c, ++at) {
            const int32_t want = 1000 * k + 10 * row + c;
            expect_element(got[at] == want, "t.allgather", at, got[at], want);
          }
        }
      }
      break;
    }
    case kAllgatherSome: {
      check(ringlet_synchronize_result(handles[op], &res),
            "synchronize allgather with a rank giving no rows");
      int64_t rows = 0;
      for (int k = 0; k < n; ++k) rows += rows_some(k);
      expect_shape(res, "t.allgather.some", 1, &rows);
      expect_bytes(res, "t.allgather.some", (size_t)rows * sizeof(double));
      const double* got = (const double*)ringlet_result_data(res);
      long at = 0;
      for (int k = 0; k < n; ++k) {
        for (int64_t i = 0; i < rows_some(k); ++i, ++at) {
          const double want = k + 0.25 * (double)i;
          expect_element(got[at] == want, "t.allgather.some", at, got[at], want);
        }
      }
      break;
    }
    case kBroadcast:
      check(ringlet_synchronize(handles[op]), "synchronize broadcast");
      for (int i = 0; i < 10; ++i)
        expect_element(bc[i] == 0.5 * i, "t.broadcast", i, bc[i], 0.5 * i);
      break;
    case kReducescatter: {
      check(ringlet_synchronize_result(handles[op], &res), "synchronize reducescatter");
      const int64_t d0 = 2 * n + 1, mine = rs_rows(d0, r), first = rs_offset(d0, r);
      const int64_t shape[2] = {mine, 2};
      expect_shape(res, "t.reducescatter", 2, shape);
      expect_bytes(res, "t.reducescatter", (size_t)mine * 2 * sizeof(int32_t));
      const int32_t* got = (const int32_t*)ringlet_result_data(res);
      for (long i = 0; i < mine * 2; ++i) {
        const int32_t want = n * (int32_t)(first * 2 + i) + n * (n - 1) / 2;
        expect_element(got[i] == want, "t.reducescatter", i, got[i], want);
      }
      break;
    }
    case kReducescatterAvg: {
      check(ringlet_synchronize_result(handles[op], &res), "synchronize reducescatter avg");
      const int64_t d0 = n + 2, mine = rs_rows(d0, r), first = rs_offset(d0, r);
      expect_shape(res, "t.reducescatter.avg", 1, &mine);
      expect_bytes(res, "t.reducescatter.avg", (size_t)mine * sizeof(float));
      const float* got = (const float*)ringlet_result_data(res);
      for (long i = 0; i < mine; ++i) {
        /* The mean of 4j + 2k over k < n: 4j + (n - 1). */
        const float want = (float)(4 * (first + i) + (n - 1));
        expect_element(got[i] == want, "t.reducescatter.avg", i, got[i], want);
      }
      break;
    }
    case kAlltoall: {
      check(ringlet_synchronize_result(handles[op], &res), "synchronize alltoall");
      int nsplits = -1;
      const int64_t* received = ringlet_result_received_splits(res, &nsplits);
      if (nsplits != n)
        fail("alltoall's received splits do not have one entry per rank", RINGLET_OK);
      int64_t rows = 0;
      for (int i = 0; i < n; ++i) {
        if (received[i] != rows_to(i, r)) {
          fprintf(stderr,
                  "c_abi_collectives_async rank %d: t.alltoall received %lld rows from rank %d, "
                  "expected %lld\n",
                  g_rank, (long long)received[i], i, (long long)rows_to(i, r));
          exit(1);
        }
        rows += rows_to(i, r);
      }
      const int64_t shape[2] = {rows, 2};
      expect_shape(res, "t.alltoall", 2, shape);
      expect_bytes(res, "t.alltoall", (size_t)rows * 2 * sizeof(int64_t));
      const int64_t* got = (const int64_t*)ringlet_result_data(res);
      long at = 0;
      for (int i = 0; i < n; ++i) {
        for (int64_t k = 0; k < rows_to(i, r); ++k) {
          for (int c = 0; c < 2; ++c, ++at) {
            const int64_t want = 10000 * i + 100 * r + 2 * k + c;
            expect_element(got[at] == want, "t.alltoall", at, (double)got[at], (double)want);
          }
        }
      }
      break;
    }
    case kAlltoallEven: {
      check(ringlet_synchronize_result(handles[op], &res), "synchronize alltoall even");
      int nsplits = -1;
      const int64_t* received = ringlet_result_received_splits(res, &nsplits);
      if (nsplits != n)
        fail("even alltoall's received splits do not have one entry per rank", RINGLET_OK);
      const int64_t rows = 2 * n;
      expect_shape(res, "t.alltoall.even", 1, &rows);
      const int32_t* got = (const int32_t*)ringlet_result_data(res);
      for (int i = 0; i < n; ++i) {
        if (received[i] != 2) fail("even alltoall received other than 2 from a rank", RINGLET_OK);
        expect_element(got[2 * i] == 100 * i + r, "t.alltoall.even", 2 * i, got[2 * i],
                       100 * i + r);
        expect_element(got[2 * i + 1] == -(100 * i + r), "t.alltoall.even", 2 * i + 1,
                       got[2 * i + 1], -(100 * i + r));
      }
      break;
    }
    case kGroup:
      check(ringlet_synchronize(handles[kNumOps]), "synchronize group member b");
      check(ringlet_synchronize(handles[kGroup]), "synchronize group member a");
      /* x2 then x0.5: the plain sum. */
      for (int i = 0; i < 4; ++i) {
        const float want = (float)(n * (n - 1) / 2 + n * i);
        expect_element(g1_out[i] == want, "t.group.a", i, g1_out[i], want);
      }
      for (int i = 0; i < 6; ++i) {
        const float want = (float)(n * (n - 1) - n * i);
        expect_element(g2_out[i] == want, "t.group.b", i, g2_out[i], want);
      }
      break;
  }
  ringlet_result_free(res);
}

int main(void) {
  check(ringlet_init(), "init");
  g_rank = ringlet_rank();
  g_size = ringlet_size();
  if (g_size < 2 || g_size > kMaxRanks) {
    fprintf(stderr, "c_abi_collectives_async rank %d: needs 2 to %d ranks, got %d\n", g_rank,
            kMaxRanks, g_size);
    return 1;
  }

  /* Three rounds, the same names each time (the response cache's steady
   * state after the first), each in a fresh order per rank. */
  for (int round = 0; round < 3; ++round) {
    int order[kNumOps];
    int64_t handles[kNumOps + 1];
    shuffle(order, kNumOps, 4321u + 97u * (unsigned)g_rank + 13u * (unsigned)round);
    for (int k = 0; k < kNumOps; ++k) submit(order[k], handles);
    shuffle(order, kNumOps, 77u + 31u * (unsigned)g_rank + 7u * (unsigned)round);
    for (int k = 0; k < kNumOps; ++k) complete(order[k], handles);
  }

  /* Equal element counts, different dimensions: a flat count would pass,
   * the shape names the disagreement on every rank. */
  {
    static float m[6];
    const int64_t wide[2] = {2, 3}, tall[2] = {3, 2};
    int64_t h = 0;
    check(ringlet_allreduce_async_ex("t.mismatch", m, m, g_rank % 2 ? tall : wide, 2,
                                     RINGLET_FLOAT32, RINGLET_SUM, 1.0, 1.0, 0, &h),
          "allreduce_async_ex mismatched");
    ringlet_result* res = (ringlet_result*)&h; /* must come back null */
    const ringlet_status s = ringlet_synchronize_result(h, &res);
    const char* why = ringlet_last_error();
    if (s != RINGLET_ERR_MISMATCH || res != NULL || strstr(why, "'t.mismatch'") == NULL ||
        strstr(why, "[2, 3]") == NULL || strstr(why, "[3, 2]") == NULL) {
      fail("shapes [2, 3] and [3, 2] did not fail as MISMATCH naming both", s);
    }
  }

  check(ringlet_shutdown(), "shutdown");
  printf("c_abi_collectives_async rank %d of %d: OK\n", g_rank, g_size);
  return 0;
}
