// The negotiation messages every rank decodes from every other rank's slot
// each cycle (runtime::decode), and what the decoded fields then drive: the
// Negotiator's table, validation and fusion, and the cache coordinator
// (the erasures a rank asks for, the cached bits it sets, the AND of them).
//
// Input: ranks (1 + byte % 4), fusion threshold (0, or 1 << (byte % 31)),
// cache capacity (byte % 8), then cycles: per rank, a u16 length and that many
// bytes of its message (the payload of its slot). A message that does not
// decode is refused with a transport common::Failure naming the rank that
// sent it, which ends negotiation, as it does in the runtime.
//
// Checked besides "no crash": a message that decodes names only collectives,
// data types and ops that exist, and encodes back to the same bytes (but for
// the first byte's unused bits); every response names at least one tensor and
// carries one metadata per name unless it is an error.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/runtime/cache_coordinator.h"
#include "core/runtime/negotiation.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using namespace ringlet::core::runtime;

void check(bool ok) {
  if (!ok) std::abort();
}

// The slot a rank's message travels in is 1 KiB less its length field; a
// longer one goes in a second exchange, so any length can arrive.
constexpr size_t kMaxMessage = 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringlet::fuzz::FuzzInput input(data, size);
  const int ranks = 1 + input.u8() % 4;
  const uint8_t t = input.u8();
  const int64_t threshold = t == 0 ? 0 : int64_t{1} << (t % 31);
  CacheCoordinator cache(input.u8() % 8);
  Negotiator negotiator(ranks);

  for (int cycle = 0; cycle < 64 && !input.empty(); ++cycle) {
    std::vector<RankMessage> messages(ranks);
    for (int r = 0; r < ranks; ++r) {
      const auto bytes = input.bytes(input.u16() % (kMaxMessage + 1));
      const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      try {
        messages[r] = decode(text, r);
      } catch (const ringlet::common::Failure& f) {
        check(f.kind() == ringlet::common::FailureKind::kTransport && f.peer() == r);
        return 0;
      }
      for (const Metadata& md : messages[r].ready) {
        check(md.kind <= CollectiveKind::kRecv && ringlet::is_valid(md.dtype) &&
              ringlet::is_valid(md.op));
      }
      if (!text.empty()) {
        std::string again = encode(messages[r]);
        check(again.size() == text.size());
        again[0] = static_cast<char>(again[0] | (text[0] & ~3));
        check(again == text);
      }
    }

    // The response cache as the runtime coordinates it: erasures, then the
    // slots every rank set.
    std::vector<Response> cached = cache.agreed(messages, std::vector<bool>(ranks, false));
    const std::vector<Response> responses =
        negotiator.add_cycle(messages, threshold, std::move(cached));
    for (const Response& resp : responses) {
      check(!resp.names.empty());
      if (!resp.error.empty()) continue;
      check(resp.meta.size() == resp.names.size());
    }
    cache.record(responses);
    negotiator.waiting();
    negotiator.take_join_result();
  }
  return 0;
}
