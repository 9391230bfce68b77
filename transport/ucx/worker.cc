#include "ucx/worker.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "ringlet/common/logging.h"
#include "ringlet/transport/transport.h"
#include "ucx/tags.h"

namespace ringlet::transport::ucx {
namespace {

// Rounds of progress and sched_yield before a wait blocks on the event
// descriptor: with more ranks than cores the peer often needs only our core
// for a moment, and a yield is far cheaper than a sleep and a wake-up.
constexpr int kYieldsBeforeSleep = 8;

// How long a worker being destroyed waits for control messages still in flight.
constexpr auto kDrainTime = std::chrono::milliseconds(500);

// A UCX setting Ringlet chooses where the user left its variable unset.
struct Default {
  const char* variable;  // what the user sets
  const char* name;      // the setting's name in ucp_config_modify
  const char* value;
};

// Where UCX_KEEPALIVE_INTERVAL is unset it is 1 s rather than UCX's 20 s: on
// a transport that learns of a dead peer (SIGKILL, a lost host) only through
// the keepalive round, 20 s would race RINGLET_TIMEOUT_SECONDS (30 s) and
// make a lost peer a timeout. (UCX's tcp transport also sees the socket end.)
constexpr Default kEverywhere[] = {{"UCX_KEEPALIVE_INTERVAL", "KEEPALIVE_INTERVAL", "1s"}};

// On a host without RDMA devices UCX carries everything over its tcp
// transport, whose defaults suit small messages: every ring post (256 KiB)
// went by rendezvous, a round trip and a pipeline of 8 KiB fragments, through
// 64 KiB receive segments (docs/environment.md has the measurements). Where
// RDMA devices exist UCX's zero-copy rendezvous is the right protocol for
// large messages, and its defaults stay.
constexpr Default kOverTcp[] = {
    {"UCX_RNDV_THRESH", "RNDV_THRESH", "1m"},  // above the ring's posts, so they go eagerly
    // A transport's settings go by their names within the transport.
    {"UCX_TCP_TX_SEG_SIZE", "TX_SEG_SIZE", "256k"},
    {"UCX_TCP_RX_SEG_SIZE", "RX_SEG_SIZE", "1m"},
};

bool host_has_rdma_devices() {
  std::error_code ec;
  const std::filesystem::path devices = "/sys/class/infiniband";
  return std::filesystem::is_directory(devices, ec) &&
         std::filesystem::directory_iterator(devices, ec) != std::filesystem::directory_iterator();
}

void set_default(const Library& lib, ucp_config_t* config, const Default& d) {
  if (std::getenv(d.variable) != nullptr) return;
  if (ucs_status_t s = lib.ucp_config_modify(config, d.name, d.value); s != UCS_OK) {
    common::log(common::LogLevel::kDebug, "ucx: %s left at UCX's default (%s)", d.variable,
                status_text(s).c_str());
  } else {
    common::log(common::LogLevel::kDebug, "ucx: %s=%s (Ringlet's default where it is unset)",
                d.variable, d.value);
  }
}

// Reads UCX's configuration from its variables, as every UCX program does,
// then fills in Ringlet's defaults for the variables the user left unset.
ucp_config_t* read_config(const Library& lib, int rank) {
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = lib.ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) {
    throw Error(rank, -1, "ucx: cannot read UCX's configuration (" + status_text(s) + ")");
  }
  for (const Default& d : kEverywhere) set_default(lib, config, d);
  if (!host_has_rdma_devices()) {
    for (const Default& d : kOverTcp) set_default(lib, config, d);
  }
  return config;
}

const Library& loaded(int rank) {
  try {
    return library();
  } catch (common::Failure& f) {
    f.at_rank(rank);
    throw;
  }
}

}  // namespace

std::string status_text(ucs_status_t status) { return library().ucs_status_string(status); }

std::shared_ptr<Worker> Worker::create(int rank, int size) {
  const Library& lib = loaded(rank);
  std::shared_ptr<Worker> w(new Worker(lib));
  w->rank_ = rank;
  ucp_config_t* config = read_config(lib, rank);
  const std::string name = "ringlet rank " + std::to_string(rank);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                      UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.estimated_num_eps = static_cast<size_t>(std::max(size - 1, 1));
  params.mt_workers_shared = 0;
  params.name = name.c_str();
  // ucp_init, inline in UCX's header, is this call with the header's version.
  const ucs_status_t init =
      lib.ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &w->context_);
  lib.ucp_config_release(config);
  if (init != UCS_OK) {
    w->context_ = nullptr;
    throw Error(rank, -1, "ucx: ucp_init failed (" + status_text(init) + ")");
  }

  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (lib.ucp_context_query(w->context_, &attr) == UCS_OK) {
    w->cuda_ = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  }

  // Serialized, not single: UCX's single mode allows only the thread that
  // made the worker, and a carrier made (and its ring links connected) by
  // the thread in init() is then driven by the runtime's thread, or by the
  // caller's thread of a synchronous collective: one at a time, never together.
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  if (ucs_status_t s = lib.ucp_worker_create(w->context_, &wp, &w->worker_); s != UCS_OK) {
    w->worker_ = nullptr;
    throw Error(rank, -1, "ucx: ucp_worker_create failed (" + status_text(s) + ")");
  }
  ucp_address_t* address = nullptr;
  size_t length = 0;
  if (ucs_status_t s = lib.ucp_worker_get_address(w->worker_, &address, &length); s != UCS_OK) {
    throw Error(rank, -1, "ucx: no worker address (" + status_text(s) + ")");
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(address);
  w->address_.assign(bytes, bytes + length);
  lib.ucp_worker_release_address(w->worker_, address);
  if (ucs_status_t s = lib.ucp_worker_get_efd(w->worker_, &w->efd_); s != UCS_OK) {
    throw Error(rank, -1, "ucx: no event descriptor for the worker (" + status_text(s) + ")");
  }
  return w;
}

Worker::~Worker() {
  if (worker_ != nullptr) {
    const auto until = Clock::now() + kDrainTime;
    while (!owned_.empty() && Clock::now() < until) {
      lib_.ucp_worker_progress(worker_);
      reap_owned();
    }
    drain_control(until);
    // What did not finish goes with the worker; its bytes are freed only
    // after it (members outlive the destructor's body).
    for (Owned& o : owned_) lib_.ucp_request_free(o.request);
    lib_.ucp_worker_destroy(worker_);
  }
  if (context_ != nullptr) lib_.ucp_cleanup(context_);
}

void Worker::drain_control(Clock::time_point until) {
  // A peer's closed notice that arrived after this side's pair went, or a
  // handshake frame no connect() asked for, is received and dropped, so that
  // UCX finds nothing unmatched to warn about. Data left unreceived is a
  // failed collective's, and is left for that warning.
  for (TagKind kind : {TagKind::kNotice, TagKind::kHandshake}) {
    for (;;) {
      ucp_tag_recv_info_t info{};
      ucp_tag_message_h message =
          lib_.ucp_tag_probe_nb(worker_, make_tag(kind, 0), kKindMask, /*remove=*/1, &info);
      if (message == nullptr) break;
      std::vector<uint8_t> sink(info.length);
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      ucs_status_ptr_t r =
          lib_.ucp_tag_msg_recv_nbx(worker_, sink.data(), sink.size(), message, &p);
      if (UCS_PTR_IS_ERR(r) || r == nullptr) continue;
      while (lib_.ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < until) {
        lib_.ucp_worker_progress(worker_);
      }
      if (lib_.ucp_request_check_status(r) == UCS_INPROGRESS) lib_.ucp_request_cancel(worker_, r);
      lib_.ucp_request_free(r);
    }
  }
}

bool Worker::progress() {
  const bool moved = lib_.ucp_worker_progress(worker_) != 0;
  if (!owned_.empty()) reap_owned();
  return moved;
}

void Worker::reap_owned() {
  std::erase_if(owned_, [this](Owned& o) {
    if (lib_.ucp_request_check_status(o.request) == UCS_INPROGRESS) return false;
    lib_.ucp_request_free(o.request);
    return true;
  });
}

void Worker::wait(std::chrono::microseconds timeout) {
  for (int i = 0; i < kYieldsBeforeSleep; ++i) {
    if (progress()) return;
    ::sched_yield();
  }
  // Arming fails with BUSY while events are pending: progress() then. Any
  // other failure leaves nothing to wake us, so the wait only sleeps.
  const ucs_status_t armed = lib_.ucp_worker_arm(worker_);
  if (armed == UCS_ERR_BUSY) return;
  pollfd fd{efd_, POLLIN, 0};
  const timespec ts{static_cast<time_t>(timeout.count() / 1000000),
                    static_cast<long>(timeout.count() % 1000000) * 1000};
  // EINTR just ends the wait early.
  ::ppoll(armed == UCS_OK ? &fd : nullptr, armed == UCS_OK ? 1 : 0, &ts, nullptr);
}

bool Worker::send_owned(ucp_ep_h ep, ucp_tag_t tag, std::vector<uint8_t> bytes) {
  ucp_request_param_t param{};
  ucs_status_ptr_t sent = lib_.ucp_tag_send_nbx(ep, bytes.data(), bytes.size(), tag, &param);
  if (sent == nullptr) return true;
  if (UCS_PTR_IS_ERR(sent)) return false;
  owned_.push_back({sent, std::move(bytes)});
  return true;
}

}  // namespace ringlet::transport::ucx
