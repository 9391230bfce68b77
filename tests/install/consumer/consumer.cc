// Uses both public headers of an installed Ringlet: one allreduce through the
// C++ API, one through the C ABI, then prints a line the test looks for.
#include <cstdio>
#include <vector>

#include "ringlet/ringlet.h"
#include "ringlet/ringlet_c.h"

int main() {
  try {
    ringlet::init();
    const int rank = ringlet::rank();
    const int size = ringlet::size();
    std::vector<int> values(64, rank + 1), sums(64, 0);
    ringlet::allreduce(values.data(), sums.data(), values.size(), ringlet::DataType::kInt32);
    const int want = size * (size + 1) / 2;
    for (int v : sums) {
      if (v != want) {
        std::fprintf(stderr, "consumer rank %d: C++ allreduce gave %d, expected %d\n", rank, v, want);
        return 1;
      }
    }
    float x = 1.0f;
    if (ringlet_allreduce(&x, &x, 1, RINGLET_FLOAT32, RINGLET_SUM) != RINGLET_OK || x != float(size)) {
      std::fprintf(stderr, "consumer rank %d: C allreduce failed: %s\n", rank, ringlet_last_error());
      return 1;
    }
    ringlet::shutdown();
    std::printf("consumer rank %d of %d: allreduce ok\n", rank, size);
    return 0;
  } catch (const ringlet::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
