// The TCP data link's frames, as a receiving TcpPair reads them: the 24-byte
// header (kind, size, the sender's size in a mismatch notice), checked against
// the posted receive, then the payload into the posted buffer.
//
// A real TcpPair reads from one end of a socket pair; the fuzzer's bytes are
// written into the other end, as a peer would send them.
// Input: a flags byte (bits 0-1: receives posted, 1-4; bit 2: the peer closes
// its end after its bytes; bit 3: this rank also posts a 16-byte send, so a
// mismatch has a half-sent frame to pad), the size of each receive (u16, up to
// 4 KiB), then the peer's bytes.
// A refusal is PeerLost from progress() (a header of no known kind, the peer
// gone mid-message) or failed requests (a size mismatch); the pair never
// reads past a posted buffer, and once the peer has closed no request is left
// waiting.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "tcp/tcp_pair.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

namespace transport = ringlet::transport;
using transport::tcp::Fd;
using transport::tcp::PairList;
using transport::tcp::TcpPair;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringlet::fuzz::FuzzInput input(data, size);
  const uint8_t flags = input.u8();
  const int posted = 1 + (flags & 3);
  const bool peer_closes = (flags & 4) != 0;
  const bool also_send = (flags & 8) != 0;

  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) std::abort();
  Fd peer(ends[1]);

  std::vector<std::vector<uint8_t>> buffers(posted);
  std::vector<transport::Request> recvs(posted);
  transport::Request send;
  const uint8_t outgoing[16] = {};
  {
    TcpPair pair(0, 1, Fd(ends[0]), std::make_shared<PairList>());
    for (int i = 0; i < posted; ++i) {
      buffers[i].resize(input.u16() % 4097);
      pair.post_recv(buffers[i].data(), buffers[i].size(), recvs[i], transport::MemoryKind::kHost);
    }
    if (also_send) pair.post_send(outgoing, sizeof outgoing, send, transport::MemoryKind::kHost);

    const auto stream = input.rest();
    for (size_t at = 0; at < stream.size();) {
      const ssize_t n = ::send(peer.get(), stream.data() + at, stream.size() - at, MSG_NOSIGNAL);
      if (n <= 0) std::abort();  // the input is far smaller than the socket's buffer
      at += static_cast<size_t>(n);
    }
    if (peer_closes) ::shutdown(peer.get(), SHUT_WR);

    bool lost = false;
    try {
      for (int i = 0; i < 256 && pair.progress(); ++i) {
      }
    } catch (const transport::PeerLost&) {
      lost = true;
    }
    if (peer_closes || lost) {
      for (const auto& r : recvs) check(!r.pending());
    }
  }
  return 0;
}
