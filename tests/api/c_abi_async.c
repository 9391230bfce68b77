/* The asynchronous C ABI as several ranks under ringletrun: 50 named
 * allreduces submitted in a different order on each rank and completed in
 * yet another, a name submitted twice while in flight (INVALID_ARGUMENT), a
 * shape that differs between ranks (MISMATCH, named, on every rank), a
 * handle pending on one rank when the others shut down (ABORTED), then
 * init -> shutdown -> init at once. Exits non-zero, naming the rank, on the
 * first failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringlet/ringlet_c.h"

enum { kTensors = 50, kMaxCount = 100 + 7 * kTensors };

static int g_rank = -1;

static void fail(const char* what, ringlet_status s) {
  fprintf(stderr, "c_abi_async rank %d: %s (status %d): %s\n", g_rank, what, (int)s,
          ringlet_last_error());
  exit(1);
}

static void check(ringlet_status s, const char* what) {
  if (s != RINGLET_OK) fail(what, s);
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

static int32_t isend[kTensors][kMaxCount], irecv[kTensors][kMaxCount];
static float fsend[kTensors][kMaxCount], frecv[kTensors][kMaxCount];

static size_t count_of(int i) { return (size_t)(100 + 7 * i); }

int main(void) {
  check(ringlet_init(), "init");
  g_rank = ringlet_rank();
  const int n = ringlet_size();
  char name[64];

  /* 50 tensors: even ones int32 sums, odd ones float sums with pre- and
   * post-scale (x2 then x0.5, exact in binary). */
  int order[kTensors];
  int64_t handles[kTensors];
  for (int step = 0; step < 3; ++step) {
    shuffle(order, kTensors, 1234u + 77u * (unsigned)g_rank + 5u * (unsigned)step);
    for (int k = 0; k < kTensors; ++k) {
      const int i = order[k];
      const size_t c = count_of(i);
      snprintf(name, sizeof name, "grad.%d", i);
      if (i % 2 == 0) {
        for (size_t e = 0; e < c; ++e) isend[i][e] = g_rank + i + (int32_t)(e % 5) + step;
        check(ringlet_allreduce_async(name, isend[i], irecv[i], c, RINGLET_INT32, RINGLET_SUM, 1.0,
                                      1.0, &handles[i]),
              "allreduce_async int32");
      } else {
        for (size_t e = 0; e < c; ++e) fsend[i][e] = (float)(g_rank + i + (int)(e % 3) + step);
        check(ringlet_allreduce_async(name, fsend[i], frecv[i], c, RINGLET_FLOAT32, RINGLET_SUM,
                                      2.0, 0.5, &handles[i]),
              "allreduce_async float");
      }
    }
    /* Complete in another order: poll the first, wait on some, synchronize all. */
    shuffle(order, kTensors, 999u + 31u * (unsigned)g_rank + (unsigned)step);
    int done = 0;
    check(ringlet_poll(handles[order[0]], &done), "poll");
    if (done != 0 && done != 1) fail("poll gave neither 0 nor 1", RINGLET_OK);
    for (int k = 0; k < kTensors; ++k) {
      const int i = order[k];
      if (k % 3 == 0) check(ringlet_wait(handles[i], 60.0), "wait");
      check(ringlet_synchronize(handles[i]), "synchronize");
      const size_t c = count_of(i);
      for (size_t e = 0; e < c; ++e) {
        if (i % 2 == 0) {
          const int32_t want = n * (i + (int32_t)(e % 5) + step) + n * (n - 1) / 2;
          if (irecv[i][e] != want) {
            fprintf(stderr, "c_abi_async rank %d: grad.%d[%zu] is %d, expected %d\n", g_rank, i, e,
                    irecv[i][e], want);
            return 1;
          }
        } else {
          const float want = (float)(n * (i + (int)(e % 3) + step) + n * (n - 1) / 2);
          if (frecv[i][e] != want) {
            fprintf(stderr, "c_abi_async rank %d: grad.%d[%zu] is %g, expected %g\n", g_rank, i, e,
                    frecv[i][e], want);
            return 1;
          }
        }
      }
    }
  }

  /* A name already in flight is refused at once: rank 0 submits "dup" and
   * the others hold it back until rank 0 tried it a second time. */
  int32_t d[4] = {1, 1, 1, 1}, dout[4];
  int64_t dh = 0, dh2 = 0;
  if (g_rank == 0) {
    check(ringlet_allreduce_async("dup", d, dout, 4, RINGLET_INT32, RINGLET_SUM, 1.0, 1.0, &dh),
          "allreduce_async dup");
    ringlet_status s =
        ringlet_allreduce_async("dup", d, dout, 4, RINGLET_INT32, RINGLET_SUM, 1.0, 1.0, &dh2);
    if (s != RINGLET_ERR_INVALID_ARGUMENT || strstr(ringlet_last_error(), "'dup'") == NULL ||
        strstr(ringlet_last_error(), "already in flight") == NULL) {
      fail("a second 'dup' in flight was not refused naming it", s);
    }
  }
  check(ringlet_barrier(), "barrier");
  if (g_rank != 0) {
    check(ringlet_allreduce_async("dup", d, dout, 4, RINGLET_INT32, RINGLET_SUM, 1.0, 1.0, &dh),
          "allreduce_async dup");
  }
  check(ringlet_synchronize(dh), "synchronize dup");
  if (dout[0] != n) fail("dup summed wrong", RINGLET_OK);

  /* Shapes that differ between ranks: every rank's handle fails naming the
   * tensor; the runtime stays usable. */
  static float m[8];
  int64_t mh = 0;
  check(ringlet_allreduce_async("fc1.weight", m, m, (size_t)(4 + g_rank), RINGLET_FLOAT32,
                                RINGLET_SUM, 1.0, 1.0, &mh),
        "allreduce_async mismatched");
  ringlet_status s = ringlet_synchronize(mh);
  const char* why = ringlet_last_error();
  if (s != RINGLET_ERR_MISMATCH || strstr(why, "Mismatched") == NULL ||
      strstr(why, "'fc1.weight'") == NULL || strstr(why, "[4]") == NULL ||
      strstr(why, "[5]") == NULL) {
    fail("the mismatched shape did not fail with the named error", s);
  }
  printf("c_abi_async rank %d, note: mismatch reported: %s\n", g_rank, why);
  int32_t one = 1, total = 0;
  check(ringlet_allreduce(&one, &total, 1, RINGLET_INT32, RINGLET_SUM), "allreduce after mismatch");
  if (total != n) fail("allreduce after the mismatch summed wrong", RINGLET_OK);

  /* Synchronous calls with uneven counts go through the runtime too:
   * allgather of r+1 elements from rank r, and a reducescatter whose counts
   * (r+1 for rank r) are not Horovod's even split. */
  {
    size_t counts[16];
    size_t total_count = 0, offset = 0;
    if (n > 16) fail("too many ranks for this test", RINGLET_OK);
    for (int r = 0; r < n; ++r) {
      counts[r] = (size_t)(r + 1);
      if (r < g_rank) offset += counts[r];
      total_count += counts[r];
    }
    int32_t mine[16], gathered[16 * 17 / 2], rs_in[16 * 17 / 2], rs_out[16];
    for (int k = 0; k <= g_rank; ++k) mine[k] = 100 * g_rank + k;
    check(ringlet_allgather(mine, gathered, counts, RINGLET_INT32), "allgather uneven");
    size_t at = 0;
    for (int r = 0; r < n; ++r) {
      for (int k = 0; k <= r; ++k, ++at) {
        if (gathered[at] != 100 * r + k) fail("allgather uneven gave a wrong element", RINGLET_OK);
      }
    }
    for (size_t j = 0; j < total_count; ++j) rs_in[j] = (int32_t)j + g_rank;
    check(ringlet_reducescatter(rs_in, rs_out, counts, RINGLET_INT32, RINGLET_SUM),
          "reducescatter uneven");
    for (size_t k = 0; k < counts[g_rank]; ++k) {
      const int32_t want = n * (int32_t)(offset + k) + n * (n - 1) / 2;
      if (rs_out[k] != want) fail("reducescatter uneven gave a wrong element", RINGLET_OK);
    }
  }

  /* Shutdown with a handle pending: rank 0 submits a name the others never
   * submit, and the others shut down. Rank 0's runtime stops with theirs, and
   * its handle fails as ABORTED naming the tensor; so does a submission
   * after that. Rank 0 then shuts down too, and every rank starts afresh. */
  {
    static float orphan[4];
    int64_t oh = 0;
    if (g_rank == 0) {
      check(ringlet_allreduce_async("orphan", orphan, orphan, 4, RINGLET_FLOAT32, RINGLET_SUM, 1.0,
                                    1.0, &oh),
            "allreduce_async orphan");
    }
    check(ringlet_barrier(), "barrier before the others shut down");
    if (g_rank == 0) {
      s = ringlet_synchronize(oh);
      why = ringlet_last_error();
      if (s != RINGLET_ERR_ABORTED || strstr(why, "'orphan'") == NULL ||
          strstr(why, "shut down") == NULL) {
        fail("a handle pending at the others' shutdown did not fail as ABORTED naming it", s);
      }
      printf("c_abi_async rank %d, note: pending handle aborted: %s\n", g_rank, why);
      /* The runtime may still be failing what it holds when the handle
       * above completes: a late submission fails either at once or through
       * its handle, ABORTED both ways. */
      s = ringlet_allreduce_async("late", orphan, orphan, 4, RINGLET_FLOAT32, RINGLET_SUM, 1.0, 1.0,
                                  &oh);
      if (s == RINGLET_OK) s = ringlet_synchronize(oh);
      if (s != RINGLET_ERR_ABORTED || strstr(ringlet_last_error(), "'late'") == NULL) {
        fail("a submission after the runtime stopped did not fail as ABORTED naming it", s);
      }
      if (strcmp(ringlet_status_string(RINGLET_ERR_ABORTED),
                 ringlet_status_string(RINGLET_ERR_MISMATCH)) == 0) {
        fail("ABORTED and MISMATCH read the same", RINGLET_OK);
      }
    }
    check(ringlet_shutdown(), "shutdown with a pending handle");
    check(ringlet_init(), "init after the aborted handle");
  }

  /* init -> shutdown -> init at once, with no pause for rank 0's old store. */
  for (int round = 0; round < 3; ++round) {
    check(ringlet_shutdown(), "shutdown");
    check(ringlet_init(), "init again");
    total = 0;
    check(ringlet_allreduce(&one, &total, 1, RINGLET_INT32, RINGLET_SUM),
          "allreduce after init again");
    if (total != n) fail("allreduce after init again summed wrong", RINGLET_OK);
  }
  check(ringlet_shutdown(), "shutdown");
  printf("c_abi_async rank %d of %d: OK\n", g_rank, n);
  return 0;
}
