// What each collective of the plan must hand this rank, computed element by
// element in plain scalar code from every rank's deterministic input: no
// kernel, no communication, nothing shared with the library under test.
#pragma once

#include <cstdint>
#include <vector>

#include "plan.h"

namespace soak {

// The seed of one tensor's values (a grouped allreduce has several tensors).
uint64_t tensor_seed(const Collective& c, int tensor);

// Rank `rank`'s input of `tensor`, `elements` long, written in c.dtype.
void fill_input(const Collective& c, int tensor, int rank, void* buf, size_t elements);
// Elements [first, first + n) of that input, as doubles.
void input_values(const Collective& c, int tensor, int rank, uint64_t first, size_t n,
                  double* out);

// This rank's output of one tensor: its shape, the rows received from each
// member (alltoall), and its elements, computed a chunk at a time.
class Expected {
 public:
  Expected(const Collective& c, int tensor, int rank);
  std::vector<int64_t> shape;
  std::vector<int64_t> received_splits;
  uint64_t elements = 0;
  // Elements [first, first + n) of the output.
  void values(uint64_t first, size_t n, double* out) const;

 private:
  // The output is a reduction over the members of the input elements from
  // reduce_from on, or a concatenation of pieces of members' inputs.
  struct Piece {
    uint64_t at;      // where it starts in the output
    int rank;         // whose input
    uint64_t source;  // where it starts there
  };
  const Collective& c_;
  int tensor_;
  bool reduction_ = false;
  uint64_t reduce_from_ = 0;
  std::vector<Piece> pieces_;  // ascending `at`; each runs to the next
};

// Whether `got` is right: exact, except averages of floating types, which
// may be off by the rounding of a division by the number of members.
bool close_enough(const Collective& c, double expected, double got);

}  // namespace soak
