/* Process sets through the C ABI, as four ranks under ringletrun.
 *
 *   c_abi_process_sets static   sets {0, 2} and {1, 3} created at init: on
 *                               each, concurrently (and beside a world
 *                               allreduce), allreduce, allgather, broadcast
 *                               from a global root, reducescatter, alltoall
 *                               with per-member splits and a grouped
 *                               allreduce, every element checked; then the
 *                               calls a rank may not make.
 *   c_abi_process_sets dynamic  add {2, 0, 1} and {1, 3} at run time, use
 *                               them, remove them; what fails after that;
 *                               ranks adding different sets (MISMATCH).
 *
 * Every refusal must come at once (at submission, never from a hang) as
 * RINGLET_ERR_INVALID_ARGUMENT. Exits non-zero, naming the rank, on the first
 * failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringlet/ringlet_c.h"

enum { kRanks = 4, kMaxMembers = 4 };

static int g_rank = -1;

static void fail(const char* what, ringlet_status s) {
  fprintf(stderr, "c_abi_process_sets rank %d: %s (status %d, %s): %s\n", g_rank, what, (int)s,
          ringlet_status_string(s), ringlet_last_error());
  exit(1);
}

static void check(ringlet_status s, const char* what) {
  if (s != RINGLET_OK) fail(what, s);
}

static void expect_int(long long got, long long want, const char* what) {
  if (got != want) {
    fprintf(stderr, "c_abi_process_sets rank %d: %s is %lld, expected %lld\n", g_rank, what, got,
            want);
    exit(1);
  }
}

/* A refusal at once: INVALID_ARGUMENT whose message holds `needle`. */
static void expect_refused(ringlet_status s, const char* needle, const char* what) {
  if (s != RINGLET_ERR_INVALID_ARGUMENT || strstr(ringlet_last_error(), needle) == NULL) {
    fprintf(stderr,
            "c_abi_process_sets rank %d: %s: expected INVALID_ARGUMENT mentioning \"%s\", got %d "
            "(%s): %s\n",
            g_rank, what, needle, (int)s, ringlet_status_string(s), ringlet_last_error());
    exit(1);
  }
}

/* The set's members as the C ABI reports them, checked against `want`. */
static void expect_members(int id, const int* want, int n) {
  int got[kMaxMembers], count = -1;
  check(ringlet_process_set_ranks(id, NULL, 0, &count), "process_set_ranks (count)");
  expect_int(count, n, "the number of members");
  check(ringlet_process_set_ranks(id, got, kMaxMembers, &count), "process_set_ranks");
  for (int i = 0; i < n; ++i) expect_int(got[i], want[i], "a member's global rank");
  int size = -1, rank = -2, index = -1;
  check(ringlet_process_set_size(id, &size), "process_set_size");
  expect_int(size, n, "process_set_size");
  for (int i = 0; i < n; ++i) {
    if (want[i] == g_rank) index = i;
  }
  check(ringlet_process_set_rank(id, &rank), "process_set_rank");
  expect_int(rank, index, "process_set_rank");
  if (n > 1) {
    int small[1];
    expect_refused(ringlet_process_set_ranks(id, small, 1, &count), "capacity",
                   "process_set_ranks, too small");
    expect_int(count, n, "the number of members after a too small capacity");
  }
}

/* One round of every collective on set `id` (members[] ascending, this rank
 * is members[me]), names prefixed by `tag` so that sets do not share names,
 * submitted in an order of this rank's own. With `with_world` (every rank
 * calling it once per round) a world allreduce runs among them. */
static void run_on_set(int id, const int* members, int n, int me, const char* tag, int round,
                       int with_world) {
  char name[8][64];
  const char* kinds[7] = {"allreduce", "allgather", "broadcast", "reducescatter",
                          "alltoall",  "group.a",   "group.b"};
  for (int k = 0; k < 7; ++k) snprintf(name[k], sizeof name[k], "%s.%s", tag, kinds[k]);
  snprintf(name[7], sizeof name[7], "world.%d", round);

  static int32_t ar[5], ag_in[kRanks * 2], rs_in[5], a2a_in[kMaxMembers * 8 * 2];
  static float g1_in[3], g1_out[3], g2_in[4], g2_out[4];
  static double bc[6];
  static int64_t world_sum[2];
  int64_t h[8];
  const int r = g_rank;
  const int root = members[n - 1]; /* a global rank */

  for (int i = 0; i < 5; ++i) ar[i] = 10 * r + i + round;
  const int64_t ar_shape[1] = {5};
  for (int row = 0; row <= r; ++row) {
    ag_in[2 * row] = 100 * r + row;
    ag_in[2 * row + 1] = -(100 * r + row);
  }
  const int64_t ag_shape[2] = {r + 1, 2};
  for (int i = 0; i < 6; ++i) bc[i] = r == root ? 1.5 * i + round : -7.0;
  const int64_t bc_shape[2] = {2, 3};
  for (int i = 0; i < 5; ++i) rs_in[i] = i * 3 + r;
  const int64_t rs_shape[1] = {5};
  /* member me sends me + j + 1 rows of 2 to member j */
  int64_t splits[kMaxMembers], rows = 0;
  for (int j = 0; j < n; ++j) {
    splits[j] = me + j + 1;
    for (int64_t k = 0; k < splits[j]; ++k, ++rows) {
      a2a_in[2 * rows] = 1000 * r + 10 * members[j] + (int32_t)k;
      a2a_in[2 * rows + 1] = round;
    }
  }
  const int64_t a2a_shape[2] = {rows, 2};
  for (int i = 0; i < 3; ++i) g1_in[i] = (float)(r + i);
  for (int i = 0; i < 4; ++i) g2_in[i] = (float)(r * i);
  world_sum[0] = r;
  world_sum[1] = 1;
  const int64_t world_shape[1] = {2};

  /* Submission order: rotated by this rank, the group last-but-one (every
   * member submits its groups in the same order, there being one). */
  for (int step = 0; step < 6; ++step) {
    switch ((step + r) % 6) {
      case 0:
        check(ringlet_allreduce_async_ex(name[0], ar, ar, ar_shape, 1, RINGLET_INT32, RINGLET_SUM,
                                         1.0, 1.0, id, &h[0]),
              "allreduce on the set");
        break;
      case 1:
        check(ringlet_allgather_async(name[1], ag_in, ag_shape, 2, RINGLET_INT32, id, &h[1]),
              "allgather on the set");
        break;
      case 2:
        check(ringlet_broadcast_async(name[2], bc, bc_shape, 2, RINGLET_FLOAT64, root, id, &h[2]),
              "broadcast on the set");
        break;
      case 3:
        check(ringlet_reducescatter_async(name[3], rs_in, rs_shape, 1, RINGLET_INT32, RINGLET_SUM,
                                          1.0, 1.0, id, &h[3]),
              "reducescatter on the set");
        break;
      case 4:
        check(ringlet_alltoall_async(name[4], a2a_in, a2a_shape, 2, RINGLET_INT32, splits, n, id,
                                     &h[4]),
              "alltoall on the set");
        break;
      case 5:
        if (!with_world) break;
        check(ringlet_allreduce_async_ex(name[7], world_sum, world_sum, world_shape, 1,
                                         RINGLET_INT64, RINGLET_SUM, 1.0, 1.0, 0, &h[7]),
              "allreduce on the world beside the set");
        break;
    }
  }
  {
    const char* names[2] = {name[5], name[6]};
    const void* sends[2] = {g1_in, g2_in};
    void* recvs[2] = {g1_out, g2_out};
    const int64_t s1[1] = {3}, s2[1] = {4};
    const int64_t* shapes[2] = {s1, s2};
    const int ndims[2] = {1, 1};
    check(ringlet_grouped_allreduce_async(2, names, sends, recvs, shapes, ndims, RINGLET_FLOAT32,
                                          RINGLET_SUM, 1.0, 1.0, id, &h[5]),
          "grouped allreduce on the set");
  }

  /* allreduce: the members' sum only */
  check(ringlet_synchronize(h[0]), "synchronize allreduce on the set");
  for (int i = 0; i < 5; ++i) {
    long long want = 0;
    for (int m = 0; m < n; ++m) want += 10 * members[m] + i + round;
    expect_int(ar[i], want, "an element of the set's allreduce");
  }
  /* allgather: the members' rows in ascending global rank */
  ringlet_result* res = NULL;
  check(ringlet_synchronize_result(h[1], &res), "synchronize allgather on the set");
  {
    int64_t total = 0;
    for (int m = 0; m < n; ++m) total += members[m] + 1;
    expect_int(ringlet_result_ndim(res), 2, "the set's allgather ndim");
    expect_int(ringlet_result_shape(res)[0], total, "the set's allgather rows");
    expect_int((long long)ringlet_result_bytes(res), total * 2 * (long long)sizeof(int32_t),
               "the set's allgather bytes");
    const int32_t* got = (const int32_t*)ringlet_result_data(res);
    long at = 0;
    for (int m = 0; m < n; ++m) {
      for (int row = 0; row <= members[m]; ++row, at += 2) {
        expect_int(got[at], 100 * members[m] + row, "an element of the set's allgather");
        expect_int(got[at + 1], -(100 * members[m] + row), "an element of the set's allgather");
      }
    }
  }
  ringlet_result_free(res);
  /* broadcast from the global root */
  check(ringlet_synchronize(h[2]), "synchronize broadcast on the set");
  for (int i = 0; i < 6; ++i) {
    if (bc[i] != 1.5 * i + round)
      fail("an element of the set's broadcast differs from the root's", RINGLET_OK);
  }
  /* reducescatter over the members: 5 rows split 3, 2 (for two members) */
  res = NULL;
  check(ringlet_synchronize_result(h[3], &res), "synchronize reducescatter on the set");
  {
    int64_t first = 0;
    for (int m = 0; m < me; ++m) first += 5 / n + (m < 5 % n ? 1 : 0);
    const int64_t mine = 5 / n + (me < 5 % n ? 1 : 0);
    expect_int(ringlet_result_shape(res)[0], mine, "the set's reducescatter rows");
    const int32_t* got = (const int32_t*)ringlet_result_data(res);
    for (int64_t i = 0; i < mine; ++i) {
      long long want = 0;
      for (int m = 0; m < n; ++m) want += (first + i) * 3 + members[m];
      expect_int(got[i], want, "an element of the set's reducescatter");
    }
  }
  ringlet_result_free(res);
  /* alltoall: member j sent j + me + 1 rows here */
  res = NULL;
  check(ringlet_synchronize_result(h[4], &res), "synchronize alltoall on the set");
  {
    int nsplits = -1;
    const int64_t* received = ringlet_result_received_splits(res, &nsplits);
    expect_int(nsplits, n, "the set's alltoall received splits (one per member)");
    const int32_t* got = (const int32_t*)ringlet_result_data(res);
    long at = 0;
    for (int j = 0; j < n; ++j) {
      expect_int(received[j], j + me + 1, "rows received from a member");
      for (int k = 0; k < j + me + 1; ++k, at += 2) {
        expect_int(got[at], 1000 * members[j] + 10 * r + k, "an element of the set's alltoall");
        expect_int(got[at + 1], round, "an element of the set's alltoall");
      }
    }
    expect_int((long long)ringlet_result_bytes(res), at * (long long)sizeof(int32_t),
               "the set's alltoall bytes");
  }
  ringlet_result_free(res);
  /* the group */
  check(ringlet_synchronize(h[6]), "synchronize group member b on the set");
  check(ringlet_synchronize(h[5]), "synchronize group member a on the set");
  for (int i = 0; i < 3; ++i) {
    float want = 0;
    for (int m = 0; m < n; ++m) want += (float)(members[m] + i);
    if (g1_out[i] != want) fail("an element of the set's group member a", RINGLET_OK);
  }
  for (int i = 0; i < 4; ++i) {
    float want = 0;
    for (int m = 0; m < n; ++m) want += (float)(members[m] * i);
    if (g2_out[i] != want) fail("an element of the set's group member b", RINGLET_OK);
  }
  /* the world, beside the sets */
  if (with_world) {
    check(ringlet_synchronize(h[7]), "synchronize the world allreduce");
    expect_int(world_sum[0], kRanks * (kRanks - 1) / 2, "the world allreduce's rank sum");
    expect_int(world_sum[1], kRanks, "the world allreduce's count");
  }
}

/* Calls on set `other`, which this rank is not in, and on `unknown`, which
 * does not exist: all refused at once. */
static void expect_refusals(int other, int unknown, int own, const int* own_members, int n_own) {
  int32_t x[2] = {1, 2};
  const int64_t shape[1] = {2};
  int64_t h = 99;
  char who[32];
  snprintf(who, sizeof who, "process set %d", other);
  expect_refused(ringlet_allreduce_async_ex("refused.allreduce", x, x, shape, 1, RINGLET_INT32,
                                            RINGLET_SUM, 1.0, 1.0, other, &h),
                 "not a member", "allreduce on a set this rank is not in");
  if (strstr(ringlet_last_error(), who) == NULL ||
      strstr(ringlet_last_error(), "'refused.allreduce'") == NULL) {
    fail("the refusal does not name the set and the tensor", RINGLET_ERR_INVALID_ARGUMENT);
  }
  expect_int(h, 0, "the handle of a refused call");
  expect_refused(
      ringlet_allgather_async("refused.allgather", x, shape, 1, RINGLET_INT32, other, &h),
      "not a member", "allgather on a set this rank is not in");
  expect_refused(
      ringlet_alltoall_async("refused.alltoall", x, shape, 1, RINGLET_INT32, NULL, 0, other, &h),
      "not a member", "alltoall on a set this rank is not in");

  snprintf(who, sizeof who, "%d", unknown);
  expect_refused(ringlet_allreduce_async_ex("refused.unknown", x, x, shape, 1, RINGLET_INT32,
                                            RINGLET_SUM, 1.0, 1.0, unknown, &h),
                 who, "allreduce on an unknown set");
  int size = 0, rank = 0, count = 0;
  expect_refused(ringlet_process_set_size(unknown, &size), who,
                 "process_set_size of an unknown set");
  expect_refused(ringlet_process_set_rank(unknown, &rank), who,
                 "process_set_rank of an unknown set");
  expect_refused(ringlet_process_set_ranks(unknown, NULL, 0, &count), who,
                 "process_set_ranks of an unknown set");
  expect_refused(ringlet_allreduce_async_ex("refused.negative", x, x, shape, 1, RINGLET_INT32,
                                            RINGLET_SUM, 1.0, 1.0, -1, &h),
                 "-1", "allreduce on set -1");

  /* A root outside the set: a global rank that is not a member. */
  int outsider = -1;
  for (int r = 0; r < kRanks && outsider < 0; ++r) {
    int member = 0;
    for (int i = 0; i < n_own; ++i) member |= own_members[i] == r;
    if (!member) outsider = r;
  }
  if (outsider >= 0) {
    double b[2] = {0, 0};
    expect_refused(
        ringlet_broadcast_async("refused.root", b, shape, 1, RINGLET_FLOAT64, outsider, own, &h),
        "root", "broadcast whose root is not a member of the set");
  }
}

static int run_static(void) {
  /* {0, 2} is set 1, {1, 3} set 2. */
  const int ranks[4] = {0, 2, 1, 3}, sizes[2] = {2, 2};
  check(ringlet_init_with_process_sets(ranks, sizes, 2), "init_with_process_sets");
  g_rank = ringlet_rank();
  if (ringlet_size() != kRanks) fail("this test needs 4 ranks", RINGLET_OK);
  const int set1[2] = {0, 2}, set2[2] = {1, 3}, world[4] = {0, 1, 2, 3};
  expect_members(0, world, 4);
  expect_members(1, set1, 2);
  expect_members(2, set2, 2);
  const int own = g_rank % 2 == 0 ? 1 : 2;
  const int* members = own == 1 ? set1 : set2;
  const int me = g_rank / 2;
  for (int round = 0; round < 3; ++round)
    run_on_set(own, members, 2, me, own == 1 ? "even" : "odd", round, 1);
  expect_refusals(3 - own, 42, own, members, 2);
  /* Synchronous calls on the world still agree after all that. */
  int32_t one = 1, total = 0;
  check(ringlet_allreduce(&one, &total, 1, RINGLET_INT32, RINGLET_SUM),
        "world allreduce after the sets");
  expect_int(total, kRanks, "the world allreduce after the sets");
  check(ringlet_shutdown(), "shutdown");
  return 0;
}

static int run_dynamic(void) {
  check(ringlet_init(), "init");
  g_rank = ringlet_rank();
  if (ringlet_size() != kRanks) fail("this test needs 4 ranks", RINGLET_OK);
  /* Before any set: only the world. */
  const int world[4] = {0, 1, 2, 3};
  expect_members(0, world, 4);

  /* Unsorted ranks are sorted; every rank adds, members or not. */
  const int three_in[3] = {2, 0, 1}, three[3] = {0, 1, 2}, pair[2] = {1, 3};
  int a = -1, b = -1;
  check(ringlet_add_process_set(three_in, 3, &a), "add_process_set {2, 0, 1}");
  check(ringlet_add_process_set(pair, 2, &b), "add_process_set {1, 3}");
  if (a <= 0 || b <= 0 || a == b)
    fail("add_process_set gave ids that are not distinct and positive", RINGLET_OK);
  expect_members(a, three, 3);
  expect_members(b, pair, 2);

  for (int round = 0; round < 2; ++round) {
    /* Rank 1 is in both sets: it runs one after the other. */
    if (g_rank <= 2) run_on_set(a, three, 3, g_rank, "three", round, 0);
    if (g_rank == 1 || g_rank == 3) run_on_set(b, pair, 2, g_rank == 1 ? 0 : 1, "pair", round, 0);
    if (g_rank == 0 || g_rank == 2) {
      /* Not in the pair: refused at once. */
      int32_t x = 0;
      int64_t h = 0;
      const int64_t shape[1] = {1};
      expect_refused(ringlet_allreduce_async_ex("pair.outsider", &x, &x, shape, 1, RINGLET_INT32,
                                                RINGLET_SUM, 1.0, 1.0, b, &h),
                     "not a member", "allreduce on the pair from outside");
    }
    if (g_rank == 3) expect_refusals(a, b + a + 10, b, pair, 2);
    if (g_rank == 1 || g_rank == 3) check(ringlet_process_set_barrier(b), "barrier on the pair");
  }

  check(ringlet_remove_process_set(a), "remove_process_set");
  int size = 0;
  expect_refused(ringlet_process_set_size(a, &size), "", "process_set_size of a removed set");
  int32_t x = 0;
  int64_t h = 0;
  const int64_t shape[1] = {1};
  expect_refused(ringlet_allreduce_async_ex("removed.allreduce", &x, &x, shape, 1, RINGLET_INT32,
                                            RINGLET_SUM, 1.0, 1.0, a, &h),
                 "", "allreduce on a removed set");
  /* The other set is untouched. */
  expect_members(b, pair, 2);
  check(ringlet_remove_process_set(b), "remove_process_set of the pair");
  expect_refused(ringlet_remove_process_set(b), "", "removing a set twice");
  expect_refused(ringlet_remove_process_set(0), "", "removing the world");
  const int bad[2] = {0, kRanks + 5};
  int c = -2;
  expect_refused(ringlet_add_process_set(bad, 2, &c), "", "a set with a rank outside the world");
  expect_int(c, -1, "the id of a refused add_process_set");

  /* Ranks that disagree about a set: MISMATCH on every rank, nothing added. */
  const int mine[2] = {0, g_rank == 0 ? 1 : 2};
  c = -2;
  const ringlet_status s = ringlet_add_process_set(mine, 2, &c);
  if (s != RINGLET_ERR_MISMATCH) fail("ranks adding different sets did not get MISMATCH", s);
  expect_int(c, -1, "the id of a mismatched add_process_set");

  /* After all that, a set added again works, and so does the world. */
  check(ringlet_add_process_set(three, 3, &a), "add_process_set again");
  if (g_rank <= 2) run_on_set(a, three, 3, g_rank, "again", 0, 0);
  check(ringlet_remove_process_set(a), "remove_process_set again");
  int32_t one = 1, total = 0;
  check(ringlet_allreduce(&one, &total, 1, RINGLET_INT32, RINGLET_SUM),
        "world allreduce after the sets");
  expect_int(total, kRanks, "the world allreduce after the sets");
  check(ringlet_shutdown(), "shutdown");
  return 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  int rc = 2;
  if (strcmp(mode, "static") == 0) {
    rc = run_static();
  } else if (strcmp(mode, "dynamic") == 0) {
    rc = run_dynamic();
  } else {
    fprintf(stderr, "usage: c_abi_process_sets static|dynamic\n");
    return 2;
  }
  if (rc == 0) printf("c_abi_process_sets %s rank %d: OK\n", mode, g_rank);
  return rc;
}
