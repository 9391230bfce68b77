// One UCP context and one UCP worker: everything a process's UCX links share.
//
// The carrier creates it and every pair holds it, so that it lives until the
// last endpoint is closed, whichever of carrier and pairs goes first. Thread
// mode serialized: a carrier and its pairs are driven by one thread at a
// time, not always the same one (worker.cc).
//
// UCX reads its own variables (UCX_TLS, UCX_NET_DEVICES, ...) as it always
// does; nothing here overrides them (worker.cc names the defaults it sets
// where a variable is unset).
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ucx/library.h"

namespace ringlet::transport::ucx {

// "Connection reset by remote peer" and the like, for messages.
std::string status_text(ucs_status_t status);

class Worker {
 public:
  // Loads UCX (library.h) at the first call. Throws transport::Error naming
  // `rank` and UCX's status (or why UCX could not be loaded).
  static std::shared_ptr<Worker> create(int rank, int size);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  const Library& lib() const { return lib_; }
  ucp_worker_h get() const { return worker_; }
  int rank() const { return rank_; }
  // This worker's address, for peers to create endpoints to it.
  const std::vector<uint8_t>& address() const { return address_; }
  // Whether the context can carry CUDA memory (UCX built with CUDA support).
  bool cuda() const { return cuda_; }

  // One round of ucp_worker_progress; true if UCX reported any event.
  bool progress();

  // Blocks until the worker has an event or `timeout` passes: a few rounds of
  // progress and sched_yield, then the worker's event descriptor (armed) in
  // poll(2), so that waiting ranks give their core away.
  void wait(std::chrono::microseconds timeout);

  // Sends `bytes` on `ep`, keeping them alive until UCX is done with them
  // (control messages: the caller need not wait). Returns false when the send
  // failed at once.
  bool send_owned(ucp_ep_h ep, ucp_tag_t tag, std::vector<uint8_t> bytes);

  // Keeps `what` until the worker is destroyed: memory UCX may still write
  // to (an endpoint's error state when its close did not finish), which is
  // safe to free only once the worker is gone.
  void keep_until_destroyed(std::shared_ptr<void> what) { kept_.push_back(std::move(what)); }

 private:
  using Clock = std::chrono::steady_clock;
  explicit Worker(const Library& lib) : lib_(lib) {}
  void reap_owned();
  void drain_control(Clock::time_point until);

  // A control message in flight and the bytes it reads.
  struct Owned {
    void* request;
    std::vector<uint8_t> bytes;
  };

  const Library& lib_;
  int rank_ = -1;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;  // owned by the worker
  bool cuda_ = false;
  std::vector<uint8_t> address_;
  std::vector<Owned> owned_;
  // Freed after the worker: members outlive the destructor's body.
  std::vector<std::shared_ptr<void>> kept_;
};

}  // namespace ringlet::transport::ucx
