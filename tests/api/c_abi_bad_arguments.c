/* A C caller that gets the arguments wrong: a dtype or an op outside the
 * enums (42), null buffers and counts, counts that overflow, a root outside
 * the job. Every call refuses with RINGLET_ERR_INVALID_ARGUMENT and a message
 * naming the argument and the rank, both on the direct path (before any
 * asynchronous call) and through the runtime (after one), and the job goes
 * on afterwards. Run as two ranks by ringletrun; exits non-zero, naming the
 * rank and the call, on the first surprise. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringlet/ringlet_c.h"

enum { kBadValue = 42, kMaxRanks = 16 };

static int g_rank = -1;
static const char* g_phase = "";

static void fail(const char* what, const char* why) {
  fprintf(stderr, "c_abi_bad_arguments rank %d: %s (%s): %s; last error: %s\n", g_rank, what,
          g_phase, why, ringlet_last_error());
  exit(1);
}

static void check(ringlet_status s, const char* what) {
  if (s != RINGLET_OK) fail(what, "failed");
}

/* The call was refused as an invalid argument, and the message holds
 * `names` and this rank. */
static void expect_refused(ringlet_status s, const char* what, const char* names) {
  if (s != RINGLET_ERR_INVALID_ARGUMENT) {
    char why[96];
    snprintf(why, sizeof why, "status %d (%s), expected invalid argument", (int)s,
             ringlet_status_string(s));
    fail(what, why);
  }
  const char* msg = ringlet_last_error();
  if (strstr(msg, names) == NULL) fail(what, names);
  char rank_text[32];
  snprintf(rank_text, sizeof rank_text, "rank %d", g_rank);
  if (strstr(msg, rank_text) == NULL) fail(what, "the message does not name the rank");
}

static const char* const kDtype42 = "unknown dtype 42";
static const char* const kOp42 = "unknown reduce op 42";

static void synchronous_calls(int n) {
  float x[kMaxRanks] = {0};
  size_t counts[kMaxRanks], huge[kMaxRanks];
  for (int r = 0; r < n; ++r) {
    counts[r] = 1;
    huge[r] = SIZE_MAX / sizeof(float); /* each fits; their sum does not */
  }
  const size_t too_many = SIZE_MAX / 2; /* floats: more bytes than size_t holds */

  expect_refused(ringlet_allreduce(x, x, 1, kBadValue, RINGLET_SUM), "allreduce dtype", kDtype42);
  expect_refused(ringlet_allreduce(x, x, 1, RINGLET_FLOAT32, kBadValue), "allreduce op", kOp42);
  expect_refused(ringlet_allreduce(x, x, too_many, RINGLET_FLOAT32, RINGLET_SUM), "allreduce count",
                 "overflows size_t in bytes");
  expect_refused(ringlet_allreduce(NULL, x, 1, RINGLET_FLOAT32, RINGLET_SUM), "allreduce send",
                 "send is null");
  expect_refused(ringlet_allreduce(x, NULL, 1, RINGLET_FLOAT32, RINGLET_SUM), "allreduce recv",
                 "recv is null");

  expect_refused(ringlet_allgather(x, x, counts, kBadValue), "allgather dtype", kDtype42);
  expect_refused(ringlet_allgather(x, x, NULL, RINGLET_FLOAT32), "allgather recv_counts",
                 "recv_counts is null");
  expect_refused(ringlet_allgather(NULL, x, counts, RINGLET_FLOAT32), "allgather send",
                 "send is null");
  expect_refused(ringlet_allgather(x, NULL, counts, RINGLET_FLOAT32), "allgather recv",
                 "recv is null");
  if (n > 1) {
    expect_refused(ringlet_allgather(x, x, huge, RINGLET_FLOAT32), "allgather huge counts",
                   "recv_counts sums past the addressable size");
  }

  expect_refused(ringlet_broadcast(x, 1, kBadValue, 0), "broadcast dtype", kDtype42);
  expect_refused(ringlet_broadcast(x, 1, RINGLET_FLOAT32, n), "broadcast root", "is out of range");
  expect_refused(ringlet_broadcast(x, 1, RINGLET_FLOAT32, -1), "broadcast root -1",
                 "root -1 is out of range");
  expect_refused(ringlet_broadcast(x, too_many, RINGLET_FLOAT32, 0), "broadcast count",
                 "overflows size_t in bytes");
  expect_refused(ringlet_broadcast(NULL, 1, RINGLET_FLOAT32, 0), "broadcast buffer",
                 "buffer is null");

  expect_refused(ringlet_reducescatter(x, x, counts, kBadValue, RINGLET_SUM), "reducescatter dtype",
                 kDtype42);
  expect_refused(ringlet_reducescatter(x, x, counts, RINGLET_FLOAT32, kBadValue),
                 "reducescatter op", kOp42);
  expect_refused(ringlet_reducescatter(x, x, NULL, RINGLET_FLOAT32, RINGLET_SUM),
                 "reducescatter recv_counts", "recv_counts is null");
  expect_refused(ringlet_reducescatter(NULL, x, counts, RINGLET_FLOAT32, RINGLET_SUM),
                 "reducescatter send", "send is null");
  expect_refused(ringlet_reducescatter(x, NULL, counts, RINGLET_FLOAT32, RINGLET_SUM),
                 "reducescatter recv", "recv is null");
  if (n > 1) {
    expect_refused(ringlet_reducescatter(x, x, huge, RINGLET_FLOAT32, RINGLET_SUM),
                   "reducescatter huge counts", "recv_counts sums past the addressable size");
  }

  expect_refused(ringlet_alltoall(x, counts, x, counts, kBadValue), "alltoall dtype", kDtype42);
  expect_refused(ringlet_alltoall(x, NULL, x, counts, RINGLET_FLOAT32), "alltoall send_counts",
                 "send_counts is null");
  expect_refused(ringlet_alltoall(x, counts, x, NULL, RINGLET_FLOAT32), "alltoall recv_counts",
                 "recv_counts is null");
  expect_refused(ringlet_alltoall(NULL, counts, x, counts, RINGLET_FLOAT32), "alltoall send",
                 "send is null");
  expect_refused(ringlet_alltoall(x, counts, NULL, counts, RINGLET_FLOAT32), "alltoall recv",
                 "recv is null");
  if (n > 1) {
    expect_refused(ringlet_alltoall(x, huge, x, counts, RINGLET_FLOAT32), "alltoall huge sends",
                   "send_counts sums past the addressable size");
    expect_refused(ringlet_alltoall(x, counts, x, huge, RINGLET_FLOAT32), "alltoall huge recvs",
                   "recv_counts sums past the addressable size");
  }
}

/* Each refused call leaves no handle behind. */
static void expect_no_handle(int64_t h, const char* what) {
  if (h != 0) fail(what, "a refused call left a handle");
}

static void asynchronous_calls(void) {
  float x[4] = {0};
  const int64_t shape[1] = {4};
  int64_t h = -1;
  expect_refused(ringlet_allreduce_async("bad.a", x, x, 4, kBadValue, RINGLET_SUM, 1, 1, &h),
                 "allreduce_async dtype", kDtype42);
  expect_no_handle(h, "allreduce_async dtype");
  h = -1;
  expect_refused(ringlet_allreduce_async("bad.b", x, x, 4, RINGLET_FLOAT32, kBadValue, 1, 1, &h),
                 "allreduce_async op", kOp42);
  expect_no_handle(h, "allreduce_async op");
  h = -1;
  expect_refused(
      ringlet_allreduce_async_ex("bad.c", x, x, shape, 1, kBadValue, RINGLET_SUM, 1, 1, 0, &h),
      "allreduce_async_ex dtype", kDtype42);
  expect_refused(
      ringlet_allreduce_async_ex("bad.d", x, x, shape, 1, RINGLET_FLOAT32, kBadValue, 1, 1, 0, &h),
      "allreduce_async_ex op", kOp42);
  expect_refused(ringlet_allgather_async("bad.e", x, shape, 1, kBadValue, 0, &h),
                 "allgather_async dtype", kDtype42);
  expect_refused(ringlet_broadcast_async("bad.f", x, shape, 1, kBadValue, 0, 0, &h),
                 "broadcast_async dtype", kDtype42);
  expect_refused(
      ringlet_reducescatter_async("bad.g", x, shape, 1, kBadValue, RINGLET_SUM, 1, 1, 0, &h),
      "reducescatter_async dtype", kDtype42);
  expect_refused(
      ringlet_reducescatter_async("bad.h", x, shape, 1, RINGLET_FLOAT32, kBadValue, 1, 1, 0, &h),
      "reducescatter_async op", kOp42);
  expect_refused(ringlet_alltoall_async("bad.i", x, shape, 1, kBadValue, NULL, 0, 0, &h),
                 "alltoall_async dtype", kDtype42);
  expect_no_handle(h, "the last asynchronous call");

  const char* names[1] = {"bad.j"};
  const void* sends[1] = {x};
  void* recvs[1] = {x};
  const int64_t* shapes[1] = {shape};
  const int ndims[1] = {1};
  int64_t hs[1] = {-1};
  expect_refused(ringlet_grouped_allreduce_async(1, names, sends, recvs, shapes, ndims, kBadValue,
                                                 RINGLET_SUM, 1, 1, 0, hs),
                 "grouped_allreduce_async dtype", kDtype42);
  expect_refused(ringlet_grouped_allreduce_async(1, names, sends, recvs, shapes, ndims,
                                                 RINGLET_FLOAT32, kBadValue, 1, 1, 0, hs),
                 "grouped_allreduce_async op", kOp42);
  expect_no_handle(hs[0], "grouped_allreduce_async");
}

/* The job is unharmed: a correct allreduce gives the exact sum. */
static void still_works(int n) {
  int32_t v[3] = {g_rank, 1, -g_rank};
  check(ringlet_allreduce(v, v, 3, RINGLET_INT32, RINGLET_SUM), "allreduce after the refusals");
  if (v[0] != n * (n - 1) / 2 || v[1] != n || v[2] != -n * (n - 1) / 2) {
    fail("allreduce after the refusals", "wrong sum");
  }
}

int main(void) {
  if (strcmp(ringlet_status_string(kBadValue), "unknown status") != 0) {
    fail("status_string(42)", ringlet_status_string(kBadValue));
  }
  check(ringlet_init(), "init");
  g_rank = ringlet_rank();
  const int n = ringlet_size();
  if (n < 1 || n > kMaxRanks) fail("size", "out of the range this test handles");

  g_phase = "direct";
  synchronous_calls(n);
  still_works(n);

  g_phase = "asynchronous";
  asynchronous_calls();

  g_phase = "through the runtime";
  synchronous_calls(n);
  still_works(n);

  check(ringlet_shutdown(), "shutdown");
  printf("c_abi_bad_arguments rank %d of %d, note: every bad argument refused\n", g_rank, n);
  return 0;
}
