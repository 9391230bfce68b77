#include "core/nvtx/nvtx.h"

#include <string>

#if defined(RINGLET_HAVE_NVTX3)
#include <nvtx3/nvToolsExt.h>
#endif

namespace ringlet::core::nvtx {

namespace detail {
std::atomic<bool> enabled{false};
}

#if defined(RINGLET_HAVE_NVTX3)

namespace {
nvtxDomainHandle_t domain() {
  static nvtxDomainHandle_t d = nvtxDomainCreateA("Ringlet");
  return d;
}
}  // namespace

bool available() { return true; }

void set_enabled(bool on) {
  if (on) domain();  // create the domain before the first range
  detail::enabled.store(on, std::memory_order_relaxed);
}

void detail::push(const char* name, uint64_t bytes, int64_t tensors, std::optional<DataType> dtype) {
  std::string message = name;
  if (dtype) {
    message += ' ';
    message += to_string(*dtype);
  }
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.category = static_cast<uint32_t>(tensors < 0 ? 0 : tensors > 0xffffffffLL ? 0xffffffffLL : tensors);
  attr.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  attr.payload.ullValue = bytes;
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = message.c_str();
  nvtxDomainRangePushEx(domain(), &attr);
}

void detail::pop() { nvtxDomainRangePop(domain()); }

#else

bool available() { return false; }
void set_enabled(bool) { detail::enabled.store(false, std::memory_order_relaxed); }
void detail::push(const char*, uint64_t, int64_t, std::optional<DataType>) {}
void detail::pop() {}

#endif

}  // namespace ringlet::core::nvtx
