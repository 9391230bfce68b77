/* A rank that dies before a collective: the survivor's call must return
 * RINGLET_ERR_PEER_LOST (not hang, not crash) with a message naming the dead
 * rank. Run as two ranks by ringletrun; rank 1 leaves without a word. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ringlet/ringlet_c.h"

int main(void) {
  if (ringlet_init() != RINGLET_OK) {
    fprintf(stderr, "c_abi_peer_lost: init failed: %s\n", ringlet_last_error());
    return 1;
  }
  const int rank = ringlet_rank();
  if (rank == 1) _exit(0);
  static float x[1 << 18];
  ringlet_status s = ringlet_allreduce(x, x, sizeof x / sizeof x[0], RINGLET_FLOAT32, RINGLET_SUM);
  const char* why = ringlet_last_error();
  if (s != RINGLET_ERR_PEER_LOST || strstr(why, "rank 1") == NULL) {
    fprintf(stderr, "c_abi_peer_lost rank %d: expected PEER_LOST naming rank 1, got %d: %s\n", rank,
            (int)s, why);
    return 1;
  }
  printf("c_abi_peer_lost rank %d: PEER_LOST as expected: %s\n", rank, why);
  ringlet_shutdown();
  return 0;
}
