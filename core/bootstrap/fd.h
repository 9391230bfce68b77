// One owner per file descriptor (the one type of common/).
#pragma once

#include "ringlet/common/fd.h"

namespace ringlet::core::bootstrap {

using UniqueFd = common::UniqueFd;

}  // namespace ringlet::core::bootstrap
