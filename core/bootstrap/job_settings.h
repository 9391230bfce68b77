// The settings every rank of a job must share, checked once at start-up.
//
// Each rank negotiates fusion and caches responses on its own (from the same
// messages, core/runtime/negotiation.h) and picks algorithms and paths from
// its own configuration, so ranks that disagree on HOROVOD_FUSION_THRESHOLD,
// HOROVOD_CACHE_CAPACITY, RINGLET_ALGORITHM, the window's size or the
// operations would run different collectives against each other: a hang
// until the deadline, or a wrong answer. Instead every rank publishes these
// settings, rank 0 compares them with its own, and every rank fails the same
// way, naming each setting that differs, the ranks and their values.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/bootstrap/store.h"
#include "core/config.h"
#include "ringlet/transport/transport.h"

namespace ringlet::core {

// The job-wide settings of `config`, as (variable, value) in a fixed order,
// each value spelt as a user would write it and canonical ("16M" and
// "16777216" read the same).
std::vector<std::pair<std::string, std::string>> job_wide_settings(const Config& config);

// Exchanges the job-wide settings of rank `rank` of `size` through `store`;
// throws ConfigError on every rank when any rank's differ from rank 0's, and
// transport::Timeout past `deadline`.
void check_job_settings(const Config& config, int rank, int size, StoreClient& store,
                        transport::Deadline deadline);

}  // namespace ringlet::core
