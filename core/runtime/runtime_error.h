// The error a runtime handle or call fails with. Its message names the tensor,
// the ranks and the cause, ready for the user.
#pragma once

#include <stdexcept>

namespace ringlet::core::runtime {

class RuntimeError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace ringlet::core::runtime
