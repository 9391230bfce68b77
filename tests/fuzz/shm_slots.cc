// The shm channel's slot headers (channel.h), as a receiving ShmPair reads
// them: the peer writes each slot's header (the whole message's size, the
// chunk's size) into memory this rank maps, then publishes the slot by
// advancing head.
//
// A real ShmPair reads from a channel in a nameless segment; the fuzzer plays
// the peer, writing slot headers and head as a sender would.
// Input: a flags byte (bits 0-1: receives posted, 1-4; bit 2: sizes are
// counted in units of 16 bytes, so a message spans up to two 512 KiB chunks;
// bit 3: the peer closes its end at the last), the size of each receive
// (u16), then rounds of: how many slots to publish (1-8, as far as free
// slots allow), and per slot its message size and chunk size (u32 each).
// A refusal is PeerLost from progress() or failed requests; the pair never
// copies past a posted buffer or out of a slot.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "shm/channel.h"
#include "shm/segment.h"
#include "shm/shm_pair.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

namespace transport = ringlet::transport;
namespace shm = ringlet::transport::shm;

// Three segments made once and mapped afresh for each input (as a peer maps
// them), so a run costs two mappings rather than 8 MiB of new memory.
struct Memory {
  shm::Segment out = shm::Segment::anonymous(shm::kChannelBytes);
  shm::Segment in = shm::Segment::anonymous(shm::kChannelBytes);
  shm::Segment page = shm::Segment::anonymous(shm::kRankPageBytes);

  static shm::Segment again(const shm::Segment& s) {
    return shm::Segment::open_of_process(::getpid(), s.fd(), s.size());
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringlet::fuzz::FuzzInput input(data, size);
  const uint8_t flags = input.u8();
  const int posted = 1 + (flags & 3);
  const size_t unit = (flags & 4) ? 16 : 1;
  const bool peer_closes = (flags & 8) != 0;

  static Memory memory;
  std::memset(memory.out.data(), 0, shm::kChannelDataOffset);
  std::memset(memory.in.data(), 0, shm::kChannelDataOffset);
  std::memset(memory.page.data(), 0, shm::kRankPageBytes);
  auto* channel = reinterpret_cast<shm::ChannelControl*>(memory.in.data());
  reinterpret_cast<shm::RankPage*>(memory.page.data())->pid = ::getpid();

  // Left uninitialised: zeroing megabytes would cost more than the rest of a run.
  std::vector<std::unique_ptr<uint8_t[]>> buffers(posted);
  std::vector<transport::Request> recvs(posted);
  {
    shm::ShmPair pair(0, 1, Memory::again(memory.out), Memory::again(memory.in),
                      Memory::again(memory.page), std::make_shared<shm::PairList>());
    for (int i = 0; i < posted; ++i) {
      const size_t bytes = input.u16() * unit;
      buffers[i] = std::make_unique_for_overwrite<uint8_t[]>(bytes);
      pair.post_recv(buffers[i].get(), bytes, recvs[i], transport::MemoryKind::kHost);
    }
    uint64_t head = 0;
    try {
      while (!input.empty()) {
        const uint64_t tail = channel->tail.load(std::memory_order_acquire);
        const uint64_t publish =
            std::min<uint64_t>(1 + input.u8() % shm::kSlots, shm::kSlots - (head - tail));
        for (uint64_t i = 0; i < publish; ++i) {
          const uint64_t message = input.u32();
          const uint64_t chunk = input.u32();
          channel->slots[head % shm::kSlots] = {message, chunk};
          ++head;
        }
        channel->head.store(head, std::memory_order_release);
        for (int i = 0; i < 64 && pair.progress(); ++i) {
        }
      }
      if (peer_closes) {
        channel->sender_closed.store(1, std::memory_order_release);
        pair.check_alive();
        pair.progress();
      }
    } catch (const transport::PeerLost&) {
    }
  }
  return 0;
}
