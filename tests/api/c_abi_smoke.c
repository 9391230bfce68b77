/* Every collective through the C ABI, run as several ranks by ringletrun.
 * Values are small integers so that every result is exact. Exits non-zero,
 * naming the rank and the collective, on the first wrong element. */
#include <stdio.h>
#include <stdlib.h>

#include "ringlet/ringlet_c.h"

static int g_rank = -1;

static void check(ringlet_status s, const char* what) {
  if (s != RINGLET_OK) {
    fprintf(stderr, "c_abi_smoke rank %d: %s failed (%d): %s\n", g_rank, what, (int)s,
            ringlet_last_error());
    exit(1);
  }
}

static void expect(int ok, const char* what, size_t i, double got, double want) {
  if (!ok) {
    fprintf(stderr, "c_abi_smoke rank %d: %s: element %zu is %g, expected %g\n", g_rank, what, i,
            got, want);
    exit(1);
  }
}

int main(void) {
  check(ringlet_init(), "init");
  g_rank = ringlet_rank();
  const int n = ringlet_size();
  enum { kCount = 1000, kMaxRanks = 16 };
  if (n > kMaxRanks) return 2;
  size_t counts[kMaxRanks];
  for (int r = 0; r < n; ++r) counts[r] = kCount;

  /* allreduce: sum and max of int32, sum of float */
  static int32_t isend[kCount], irecv[kCount];
  static float fsend[kCount], frecv[kCount];
  for (int i = 0; i < kCount; ++i) {
    isend[i] = g_rank * 10 + i % 7;
    fsend[i] = (float)(g_rank + i % 5);
  }
  check(ringlet_allreduce(isend, irecv, kCount, RINGLET_INT32, RINGLET_SUM), "allreduce sum int32");
  for (int i = 0; i < kCount; ++i) {
    int32_t want = 10 * n * (n - 1) / 2 + n * (i % 7);
    expect(irecv[i] == want, "allreduce sum int32", (size_t)i, irecv[i], want);
  }
  check(ringlet_allreduce(isend, irecv, kCount, RINGLET_INT32, RINGLET_MAX), "allreduce max int32");
  for (int i = 0; i < kCount; ++i) {
    int32_t want = (n - 1) * 10 + i % 7;
    expect(irecv[i] == want, "allreduce max int32", (size_t)i, irecv[i], want);
  }
  check(ringlet_allreduce(fsend, fsend, kCount, RINGLET_FLOAT32, RINGLET_SUM),
        "allreduce in place float");
  for (int i = 0; i < kCount; ++i) {
    float want = (float)(n * (n - 1) / 2 + n * (i % 5));
    expect(fsend[i] == want, "allreduce in place float", (size_t)i, fsend[i], want);
  }

  /* allgather: rank r contributes kCount copies of r*100 + i%3 */
  static int32_t gathered[kMaxRanks * kCount];
  for (int i = 0; i < kCount; ++i) isend[i] = g_rank * 100 + i % 3;
  check(ringlet_allgather(isend, gathered, counts, RINGLET_INT32), "allgather");
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < kCount; ++i) {
      int32_t want = r * 100 + i % 3;
      expect(gathered[r * kCount + i] == want, "allgather", (size_t)(r * kCount + i),
             gathered[r * kCount + i], want);
    }
  }

  /* broadcast from the last rank */
  for (int i = 0; i < kCount; ++i) irecv[i] = g_rank == n - 1 ? 7 * i : -1;
  check(ringlet_broadcast(irecv, kCount, RINGLET_INT32, n - 1), "broadcast");
  for (int i = 0; i < kCount; ++i)
    expect(irecv[i] == 7 * i, "broadcast", (size_t)i, irecv[i], 7 * i);

  /* reducescatter: element j of every rank's input is j + rank; rank r gets block r summed */
  static int32_t rs_in[kMaxRanks * kCount];
  for (int j = 0; j < n * kCount; ++j) rs_in[j] = j % 50 + g_rank;
  check(ringlet_reducescatter(rs_in, irecv, counts, RINGLET_INT32, RINGLET_SUM), "reducescatter");
  for (int i = 0; i < kCount; ++i) {
    int j = g_rank * kCount + i;
    int32_t want = n * (j % 50) + n * (n - 1) / 2;
    expect(irecv[i] == want, "reducescatter", (size_t)i, irecv[i], want);
  }

  /* alltoall: block b of rank r's input is r*1000 + b*10 + i%10 */
  static int32_t a2a_in[kMaxRanks * kCount], a2a_out[kMaxRanks * kCount];
  for (int b = 0; b < n; ++b) {
    for (int i = 0; i < kCount; ++i) a2a_in[b * kCount + i] = g_rank * 1000 + b * 10 + i % 10;
  }
  check(ringlet_alltoall(a2a_in, counts, a2a_out, counts, RINGLET_INT32), "alltoall");
  for (int b = 0; b < n; ++b) {
    for (int i = 0; i < kCount; ++i) {
      int32_t want = b * 1000 + g_rank * 10 + i % 10;
      expect(a2a_out[b * kCount + i] == want, "alltoall", (size_t)(b * kCount + i),
             a2a_out[b * kCount + i], want);
    }
  }

  check(ringlet_barrier(), "barrier");
  check(ringlet_shutdown(), "shutdown");
  printf("c_abi_smoke rank %d of %d: OK\n", g_rank, n);
  return 0;
}
