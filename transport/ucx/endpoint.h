// A UCP endpoint to one peer's worker, with UCX's peer error handling: when
// the transport finds the peer gone (reset, unreachable, the keepalive round
// unanswered), UCX fails the endpoint's sends and calls back, and status()
// says so from then on. The pair turns that into PeerLost naming the peer.
//
// Closed when destroyed: flushed when the link is healthy (what was sent
// still reaches the peer), forced otherwise, progressing the worker until UCX
// is done or kCloseTime passes.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <memory>
#include <vector>

#include "ucx/worker.h"

namespace ringlet::transport::ucx {

class Endpoint {
 public:
  // How long a close may take before the endpoint is left to UCX.
  // A healthy peer answers within milliseconds; one that is alive but busy
  // elsewhere (not progressing its worker) costs this much at most.
  static constexpr std::chrono::milliseconds kCloseTime{1000};

  // Starts connecting to the worker at `address` (UCX wires up lazily, in
  // progress). Throws transport::Error naming `peer` when UCX refuses.
  Endpoint(std::shared_ptr<Worker> worker, int peer, const std::vector<uint8_t>& address);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  ucp_ep_h get() const { return ep_; }
  int peer() const { return peer_; }
  Worker& worker() const { return *worker_; }
  const std::shared_ptr<Worker>& shared_worker() const { return worker_; }

  // UCS_OK while the endpoint works; the status UCX failed it with after.
  ucs_status_t status() const { return state_->status; }
  bool failed() const { return state_->status != UCS_OK; }

  // Closes now: `force` cancels what is in flight instead of flushing it.
  void close(bool force);

  // A close in two halves, so that a rank closing several endpoints waits
  // for them together: begin_close() starts it, finish_close() progresses
  // until UCX is done or `time` passes (close() is both, with kCloseTime).
  void begin_close(bool force);
  void finish_close(std::chrono::milliseconds time);

 private:
  // What UCX's error callback writes to. Freed with the endpoint, or, when a
  // close does not finish (UCX may still report to it), with the worker.
  struct State {
    ucs_status_t status = UCS_OK;
  };
  static void on_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  std::shared_ptr<Worker> worker_;
  int peer_;
  ucp_ep_h ep_ = nullptr;
  void* closing_ = nullptr;  // the close UCX has begun and not finished
  std::shared_ptr<State> state_;
};

}  // namespace ringlet::transport::ucx
