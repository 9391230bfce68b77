// The stall inspector: tensors that some ranks of a process set submitted and
// others have not. Horovod's two rules, and a third of Ringlet's:
//   warn     (HOROVOD_STALL_CHECK_TIME_SECONDS): at most once per period, name
//            every rank and the names it has not submitted for that long;
//   shutdown (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS): stop the whole job, once;
//   fail     (RINGLET_STALL_TIMEOUT_SECONDS, 30 min by default, PyTorch's
//            process-group default): fail that one collective on every rank,
//            naming the tensor and the ranks that never submitted it; the
//            runtime keeps running.
// Zero turns a rule off. The inspector keeps only the time each waiting name
// was first seen; the caller tells it what waits (the negotiation table and
// the response cache's bits) and what time it is, so a test drives the clock.
// One rank of the set (its rank 0) inspects: every member holds the same
// table, and the decisions travel to the others in that rank's messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/runtime/negotiation.h"

namespace ringlet::core::runtime {

struct StallPolicy {
  std::chrono::seconds warn_after{0};
  std::chrono::seconds shutdown_after{0};
  std::chrono::seconds fail_after{0};
};

// What one inspection decided. Empty strings: nothing to do.
struct StallVerdict {
  std::string warning;              // print it (the text after "ringlet: stall warning: ")
  std::string shutdown;             // stop every rank with this error
  std::vector<StalledName> failed;  // fail these on every member of the set
};

class StallInspector {
 public:
  using Clock = std::chrono::steady_clock;
  // `process_set` only names the set in messages (0: the world, unnamed).
  // `now` starts the first warning period.
  StallInspector(StallPolicy policy, int32_t process_set, Clock::time_point now);

  // False when every rule is off: the caller may skip gathering what waits.
  bool active() const;

  // `waiting`: name -> the global ranks that have not submitted it (ascending).
  StallVerdict inspect(const std::map<std::string, std::vector<int>>& waiting,
                       Clock::time_point now);

  const StallPolicy& policy() const { return policy_; }

 private:
  // "; rank 1 has not submitted 'a', 'b'; rank 2 ..." for the names that have
  // waited at least `older_than` (empty: none).
  std::string stalled_text(const std::map<std::string, std::vector<int>>& waiting,
                           std::chrono::seconds older_than, Clock::time_point now) const;

  StallPolicy policy_;
  std::string where_;  // "" or " in process set N"
  std::map<std::string, Clock::time_point> first_seen_;
  Clock::time_point last_warning_check_;
  bool shutdown_decided_ = false;
};

// "rank 3" or "ranks 1, 2": the ranks a wait is missing, for messages.
std::string ranks_text(const std::vector<int>& ranks);

}  // namespace ringlet::core::runtime
