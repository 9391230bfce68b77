#include "ucx/endpoint.h"

#include "ringlet/common/logging.h"
#include "ringlet/transport/transport.h"

namespace ringlet::transport::ucx {

Endpoint::Endpoint(std::shared_ptr<Worker> worker, int peer, const std::vector<uint8_t>& address)
    : worker_(std::move(worker)), peer_(peer), state_(std::make_shared<State>()) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Endpoint::on_error;
  params.err_handler.arg = state_.get();
  if (ucs_status_t s = worker_->lib().ucp_ep_create(worker_->get(), &params, &ep_); s != UCS_OK) {
    // Unreachable: no transport UCX may use reaches the peer and reports its
    // failure (UCX 1.13's shared-memory transports report none).
    const std::string hint =
        s == UCS_ERR_UNREACHABLE
            ? "; UCX_TLS must allow a transport that reaches it and reports peer failures, "
              "such as tcp"
            : "";
    throw Error(worker_->rank(), peer,
                "ucx: cannot create an endpoint to rank " + std::to_string(peer) + " (" +
                    status_text(s) + hint + ")");
  }
}

Endpoint::~Endpoint() { close(failed()); }

void Endpoint::on_error(void* arg, ucp_ep_h, ucs_status_t status) {
  static_cast<State*>(arg)->status = status;
}

void Endpoint::close(bool force) {
  begin_close(force);
  finish_close(kCloseTime);
}

void Endpoint::begin_close(bool force) {
  if (ep_ == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t closing = worker_->lib().ucp_ep_close_nbx(ep_, &param);
  ep_ = nullptr;
  if (closing != nullptr && !UCS_PTR_IS_ERR(closing)) closing_ = closing;
}

void Endpoint::finish_close(std::chrono::milliseconds time) {
  if (closing_ == nullptr) return;
  const auto until = std::chrono::steady_clock::now() + time;
  while (worker_->lib().ucp_request_check_status(closing_) == UCS_INPROGRESS) {
    if (std::chrono::steady_clock::now() >= until) {
      common::log(common::LogLevel::kDebug,
                  "ucx: the endpoint to rank %d did not close within %lld ms; left to UCX", peer_,
                  static_cast<long long>(time.count()));
      worker_->lib().ucp_request_free(closing_);
      closing_ = nullptr;
      worker_->keep_until_destroyed(state_);  // UCX may still report to it
      return;
    }
    if (!worker_->progress()) worker_->wait(std::chrono::microseconds(1000));
  }
  worker_->lib().ucp_request_free(closing_);
  closing_ = nullptr;
}

}  // namespace ringlet::transport::ucx
