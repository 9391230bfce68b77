// Reads a rendezvous key for set-up, turning the store's own deadline error
// (whatever type its implementation throws) into a Timeout naming the peer
// that did not show up.
#pragma once

#include <string>
#include <vector>

#include "ringlet/transport/transport.h"

namespace ringlet::transport {

// `context` completes "rank R: timed out <context>", e.g.
// "connecting to rank 3 over shm".
std::vector<uint8_t> get_or_timeout(KeyValue& store, const std::string& key, Deadline deadline,
                                    int self, int peer, const std::string& context);

}  // namespace ringlet::transport
