#include "store_wait.h"

namespace ringlet::transport {

std::vector<uint8_t> get_or_timeout(KeyValue& store, const std::string& key, Deadline deadline,
                                    int self, int peer, const std::string& context) {
  try {
    return store.get(key, deadline);
  } catch (const std::exception& e) {
    if (Clock::now() < deadline) throw;  // a real store failure, not our deadline
    const auto* f = dynamic_cast<const common::Failure*>(&e);
    throw Timeout(self, peer,
                  "timed out " + context + " (" + (f ? f->cause() : std::string(e.what())) + ")");
  }
}

}  // namespace ringlet::transport
