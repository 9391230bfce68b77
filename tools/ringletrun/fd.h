// A file descriptor with exactly one owner (the one type of common/).
#pragma once

#include "ringlet/common/fd.h"

namespace ringletrun {

using Fd = ringlet::common::UniqueFd;

}  // namespace ringletrun
