// Strangers against a live job. Two ranks under ringletrun (TCP data links,
// one host) run checked allreduces while this test, from outside the job,
// connects to the rendezvous store and to rank 0's data-link listener with no
// secret, a wrong secret, a replayed recording, an oversized or truncated
// frame and a slow drip of bytes. Each must be refused (the connection
// closed, the refusal logged); at the end the job must finish its collectives
// with correct results and exit 0. A loopback job must also listen on
// loopback addresses only.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/fd.h"
#include "ringlet/common/hmac.h"
#include "core/bootstrap/store.h"
#include "core/bootstrap/store_wire.h"
#include "ringlet/common/random.h"
#include "tcp/handshake.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ringlet::core::bootstrap::UniqueFd;
namespace fs = std::filesystem;
namespace wire = ringlet::core::bootstrap::wire;
namespace hs = ringlet::transport::tcp::handshake;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The job under attack, shared by every test of the suite (they run in order).
struct Job {
  fs::path dir;
  pid_t launcher = -1;
  std::string rendezvous, secret, job_id, link;  // link: rank 0's tcp host:port
  std::vector<pid_t> ranks;
  bool ready = false;
};
Job* g_job = nullptr;

class Stranger : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_job = new Job;
    char tmpl[] = "/tmp/ringlet-security-XXXXXX";
    g_job->dir = ::mkdtemp(tmpl);
    const pid_t pid = ::fork();
    if (pid == 0) {
      const std::string out = (g_job->dir / "output.log").string();
      FILE* f = std::freopen(out.c_str(), "w", stdout);
      if (f == nullptr || ::dup2(STDOUT_FILENO, STDERR_FILENO) < 0) ::_exit(126);
      ::setenv("SECURITY_DIR", g_job->dir.c_str(), 1);
      ::setenv("RINGLET_TRANSPORT", "tcp", 1);
      ::setenv("RINGLET_TIMEOUT_SECONDS", "60", 1);
      ::execl(RINGLETRUN, RINGLETRUN, "-np", "2", JOB_RANK, static_cast<char*>(nullptr));
      ::_exit(127);
    }
    g_job->launcher = pid;
    const auto end = Clock::now() + 60s;
    while (Clock::now() < end &&
           !(fs::exists(g_job->dir / "ready.0") && fs::exists(g_job->dir / "ready.1"))) {
      std::this_thread::sleep_for(20ms);
    }
    if (!fs::exists(g_job->dir / "ready.1") || !fs::exists(g_job->dir / "ready.0")) return;
    std::istringstream lines(read_text(g_job->dir / "job"));
    std::getline(lines, g_job->rendezvous);
    std::getline(lines, g_job->secret);
    std::getline(lines, g_job->job_id);
    std::getline(lines, g_job->link);
    for (int r = 0; r < 2; ++r) {
      g_job->ranks.push_back(std::stoi(read_text(g_job->dir / ("pid." + std::to_string(r)))));
    }
    g_job->ready = true;
  }

  static void TearDownTestSuite() {
    if (g_job->launcher > 0) {
      // Only if the last test did not already end it.
      ::kill(g_job->launcher, SIGTERM);
      ::waitpid(g_job->launcher, nullptr, 0);
    }
    fs::remove_all(g_job->dir);
    delete g_job;
  }

  void SetUp() override {
    ASSERT_TRUE(g_job->ready) << "the job did not start:\n"
                              << read_text(g_job->dir / "output.log");
  }
};

std::pair<std::string, uint16_t> split(const std::string& host_port) {
  const auto colon = host_port.rfind(':');
  return {host_port.substr(0, colon),
          static_cast<uint16_t>(std::stoi(host_port.substr(colon + 1)))};
}

UniqueFd dial(const std::string& host_port) {
  const auto [host, port] = split(host_port);
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  EXPECT_EQ(::inet_pton(AF_INET, host.c_str(), &a.sin_addr), 1) << host;
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << host_port;
  return fd;
}

bool send_all(const UniqueFd& fd, std::span<const uint8_t> data) {
  return ::send(fd.get(), data.data(), data.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(data.size());
}

// Exactly `bytes` within `limit`; false when the peer closed first or time ran out.
bool recv_exactly(const UniqueFd& fd, uint8_t* out, size_t bytes, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  size_t got = 0;
  while (got < bytes && Clock::now() < end) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd.get(), out + got, bytes - got, 0);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return got == bytes;
}

// True once the other side has closed the connection (after any bytes it sent).
bool closed_by_peer(const UniqueFd& fd, std::chrono::milliseconds limit = 5000ms) {
  const auto end = Clock::now() + limit;
  uint8_t buf[512];
  while (Clock::now() < end) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    if (::recv(fd.get(), buf, sizeof buf, 0) <= 0) return true;
  }
  return false;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string job_log() { return read_text(g_job->dir / "output.log"); }

// Waits until the job's output holds at least `n` lines containing `what`.
bool logged(const std::string& what, size_t n) {
  const auto end = Clock::now() + 10s;
  while (Clock::now() < end) {
    if (count_of(job_log(), what) >= n) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// ---- nothing listens beyond loopback -------------------------------------

std::set<std::string> socket_inodes(pid_t pid) {
  std::set<std::string> inodes;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    std::error_code ec;
    const std::string target = fs::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  return inodes;
}

// Local addresses (as /proc/net prints them) of the LISTEN sockets among `inodes`.
std::vector<std::string> listening(const std::string& table, const std::set<std::string>& inodes) {
  std::vector<std::string> found;
  std::istringstream in(read_text(table));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
    f >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
    if (state == "0A" && inodes.contains(inode)) found.push_back(local);
  }
  return found;
}

// /proc/net/tcp prints an IPv4 address as the hex of its 32-bit word in host
// order (little-endian here): 127.x.y.z ends in "7F"; tcp6 as four such words.
bool loopback(const std::string& local, bool v6) {
  const std::string addr = local.substr(0, local.find(':'));
  if (!v6) return addr.size() == 8 && addr.substr(6, 2) == "7F";
  return addr == "00000000000000000000000001000000" ||                         // ::1
         (addr.substr(0, 24) == "0000000000000000FFFF0000" && addr.substr(30, 2) == "7F");
}

TEST_F(Stranger, NothingListensBeyondLoopbackInALoopbackJob) {
  size_t listeners = 0;
  for (size_t r = 0; r < g_job->ranks.size(); ++r) {
    const auto inodes = socket_inodes(g_job->ranks[r]);
    for (bool v6 : {false, true}) {
      for (const std::string& local : listening(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", inodes)) {
        ++listeners;
        EXPECT_TRUE(loopback(local, v6))
            << "rank " << r << " listens on " << local << (v6 ? " (tcp6)" : " (tcp)");
      }
    }
  }
  // Rank 0: the store and a data link; rank 1: a data link.
  EXPECT_GE(listeners, 3u);
  EXPECT_EQ(g_job->rendezvous.rfind("127.0.0.1:", 0), 0u) << g_job->rendezvous;
  EXPECT_EQ(g_job->link.rfind("127.0.0.1:", 0), 0u) << g_job->link;
}

// ---- the rendezvous store --------------------------------------------------

constexpr char kStoreRefusal[] = "store: refused message";

// The nonce a stranger sends after the store's hello.
constexpr wire::Nonce kClientNonce = {0x5a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// Connects past the store's hello and sends kClientNonce; `nonce` gets the
// store's nonce for the connection.
UniqueFd store_connect(wire::Nonce* nonce = nullptr) {
  UniqueFd fd = dial(g_job->rendezvous);
  uint8_t hello[wire::kHelloBytes];
  EXPECT_TRUE(recv_exactly(fd, hello, sizeof hello, 5000ms)) << "no hello from the store";
  if (nonce) std::copy(hello + wire::kMagic.size(), hello + sizeof hello, nonce->begin());
  EXPECT_TRUE(send_all(fd, kClientNonce));
  return fd;
}

TEST_F(Stranger, StoreRefusesNoSecret) {
  const size_t before = count_of(job_log(), kStoreRefusal);
  wire::Nonce nonce;
  UniqueFd fd = store_connect(&nonce);
  // What a client without a secret could make: a MAC under the empty key
  // (HMAC pads it to zeros, the same as the key 0x00).
  ringlet::common::Hmac empty(std::vector<uint8_t>{0});
  wire::Channel ch{&empty, nonce, wire::Direction::kToServer, 0, kClientNonce};
  ASSERT_TRUE(send_all(fd, wire::encode(ch, wire::Op::kSet, wire::key_payload("world/hosts"))));
  EXPECT_TRUE(closed_by_peer(fd));
  EXPECT_TRUE(logged(kStoreRefusal, before + 1));
}

TEST_F(Stranger, StoreRefusesAWrongSecret) {
  ringlet::core::StoreClient bad(g_job->rendezvous, "0123456789abcdef", 99,
                                 Clock::now() + 5s);
  EXPECT_THROW(bad.set("world/hosts", {'x'}), std::runtime_error);
}

TEST_F(Stranger, StoreRefusesAReplayedMessage) {
  const size_t before = count_of(job_log(), kStoreRefusal);
  // A recording: an authentic frame on one connection (what an eavesdropper
  // on the job's own traffic would hold)...
  ringlet::common::Hmac key(ringlet::common::secret_key(g_job->secret));
  wire::Nonce nonce;
  UniqueFd first = store_connect(&nonce);
  wire::Channel ch{&key, nonce, wire::Direction::kToServer, 0, kClientNonce};
  const auto frame = wire::encode(ch, wire::Op::kTryGet, wire::key_payload("tcp/addr/0"));
  ASSERT_TRUE(send_all(first, frame));
  // ...replayed on a connection of its own.
  UniqueFd replay = store_connect();
  ASSERT_TRUE(send_all(replay, frame));
  EXPECT_TRUE(closed_by_peer(replay));
  EXPECT_TRUE(logged(kStoreRefusal, before + 1));
}

TEST_F(Stranger, StoreRefusesAnOversizedLength) {
  const size_t before = count_of(job_log(), kStoreRefusal);
  UniqueFd fd = store_connect();
  const uint8_t header[] = {0xff, 0xff, 0xff, 0xff, 1};
  ASSERT_TRUE(send_all(fd, header));
  EXPECT_TRUE(closed_by_peer(fd));
  EXPECT_TRUE(logged(kStoreRefusal, before + 1));
}

TEST_F(Stranger, StoreRefusesATruncatedFrame) {
  const size_t before = count_of(job_log(), kStoreRefusal);
  {
    UniqueFd fd = store_connect();
    const uint8_t partial[] = {0, 0, 0, 100, 1, 'a', 'b', 'c'};
    ASSERT_TRUE(send_all(fd, partial));
  }  // closed mid-frame
  EXPECT_TRUE(logged(kStoreRefusal, before + 1));
}

TEST_F(Stranger, StoreOutlastsASlowDrip) {
  const size_t before = count_of(job_log(), kStoreRefusal);
  UniqueFd fd = store_connect();
  // A frame's header and body, one byte every 50 ms: the store serves the
  // job meanwhile; the final bytes are garbage for a MAC and get refused.
  std::vector<uint8_t> drip = {0, 0, 0, 8, 1, 0, 0, 0, 4, 'k', 'e', 'y', '!'};
  drip.resize(drip.size() + wire::kMacBytes, 0xAB);
  for (uint8_t b : drip) {
    ASSERT_TRUE(send_all(fd, std::span(&b, 1)));
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(closed_by_peer(fd));
  EXPECT_TRUE(logged(kStoreRefusal, before + 1));
}

// ---- rank 0's data-link listener ------------------------------------------

constexpr char kLinkRefusal[] = "refused a tcp data-link connection";

hs::Identity as_rank1(const std::vector<uint8_t>& key) {
  hs::Identity me;
  me.key = key;
  me.job = hs::job_digest(g_job->job_id);
  me.rank = 1;
  me.size = 2;
  return me;
}

hs::Bytes32 nonce() {
  hs::Bytes32 n{};
  ringlet::common::random_bytes(n);
  return n;
}

// Sends a HELLO as rank 1 and reads the CHALLENGE; false when none came.
bool hello_and_challenge(const UniqueFd& fd, const hs::Identity& me, const hs::Bytes32& mine,
                         hs::Frame& challenge) {
  const hs::Frame h = hs::hello(me, 0, mine);
  return send_all(fd, h) && recv_exactly(fd, challenge.data(), challenge.size(), 5000ms);
}

// The acceptor's nonce from a CHALLENGE (it carries it in the clear).
hs::Bytes32 acceptor_nonce(const hs::Frame& challenge) {
  hs::Message m;
  std::string why;
  EXPECT_TRUE(hs::parse(challenge, 2, m, why)) << why;
  return m.nonce;
}

TEST_F(Stranger, DataLinkRefusesNoSecret) {
  const size_t before = count_of(job_log(), kLinkRefusal);
  const std::vector<uint8_t> none{0};
  const hs::Identity me = as_rank1(none);
  UniqueFd fd = dial(g_job->link);
  const hs::Bytes32 mine = nonce();
  hs::Frame challenge{};
  ASSERT_TRUE(hello_and_challenge(fd, me, mine, challenge));
  // Without the secret the CHALLENGE cannot be checked, nor a PROOF made.
  hs::Frame proof = hs::encode({hs::Kind::kProof, 1, 0, me.job, {}, {}});
  ASSERT_TRUE(send_all(fd, proof));
  EXPECT_TRUE(closed_by_peer(fd));
  EXPECT_TRUE(logged(kLinkRefusal, before + 1));
}

TEST_F(Stranger, DataLinkRefusesAWrongSecret) {
  const size_t before = count_of(job_log(), kLinkRefusal);
  const std::vector<uint8_t> wrong = {1, 2, 3, 4, 5, 6, 7, 8};
  const hs::Identity me = as_rank1(wrong);
  UniqueFd fd = dial(g_job->link);
  const hs::Bytes32 mine = nonce();
  hs::Frame challenge{};
  ASSERT_TRUE(hello_and_challenge(fd, me, mine, challenge));
  hs::Bytes32 theirs{};
  std::string why;
  // The listener's proof does not verify under the wrong key either.
  EXPECT_FALSE(hs::check_challenge(me, 0, mine, challenge, theirs, why));
  ASSERT_TRUE(send_all(fd, hs::proof_frame(me, 0, mine, acceptor_nonce(challenge))));
  EXPECT_TRUE(closed_by_peer(fd));
  EXPECT_TRUE(logged(kLinkRefusal, before + 1));
}

TEST_F(Stranger, DataLinkRefusesAReplayedHandshake) {
  const size_t before = count_of(job_log(), kLinkRefusal);
  // A recording of a complete, successful handshake as rank 1...
  const std::vector<uint8_t> key = ringlet::common::secret_key(g_job->secret);
  const hs::Identity me = as_rank1(key);
  hs::Frame recorded_hello{}, recorded_proof{};
  {
    UniqueFd fd = dial(g_job->link);
    const hs::Bytes32 mine = nonce();
    recorded_hello = hs::hello(me, 0, mine);
    hs::Frame challenge{};
    ASSERT_TRUE(send_all(fd, recorded_hello));
    ASSERT_TRUE(recv_exactly(fd, challenge.data(), challenge.size(), 5000ms));
    hs::Bytes32 theirs{};
    std::string why;
    ASSERT_TRUE(hs::check_challenge(me, 0, mine, challenge, theirs, why)) << why;
    recorded_proof = hs::proof_frame(me, 0, mine, theirs);
    ASSERT_TRUE(send_all(fd, recorded_proof));
    hs::Frame welcome{};
    ASSERT_TRUE(recv_exactly(fd, welcome.data(), welcome.size(), 5000ms));
    EXPECT_TRUE(hs::check_welcome(me, 0, welcome, why)) << why;
  }
  // ...replayed byte for byte: the listener's fresh nonce makes the proof stale.
  UniqueFd fd = dial(g_job->link);
  hs::Frame challenge{};
  ASSERT_TRUE(send_all(fd, recorded_hello));
  ASSERT_TRUE(recv_exactly(fd, challenge.data(), challenge.size(), 5000ms));
  ASSERT_TRUE(send_all(fd, recorded_proof));
  EXPECT_TRUE(closed_by_peer(fd));
  EXPECT_TRUE(logged(kLinkRefusal, before + 1));
}

TEST_F(Stranger, DataLinkRefusesOversizedGarbage) {
  const size_t before = count_of(job_log(), kLinkRefusal);
  UniqueFd fd = dial(g_job->link);
  std::vector<uint8_t> junk(64 * 1024);
  ringlet::common::random_bytes(junk);
  send_all(fd, junk);  // may fail part-way once the listener has closed
  EXPECT_TRUE(closed_by_peer(fd));
  EXPECT_TRUE(logged(kLinkRefusal, before + 1));
}

TEST_F(Stranger, DataLinkRefusesATruncatedFrame) {
  const size_t before = count_of(job_log(), kLinkRefusal);
  {
    UniqueFd fd = dial(g_job->link);
    const std::vector<uint8_t> key = ringlet::common::secret_key(g_job->secret);
    const hs::Frame h = hs::hello(as_rank1(key), 0, nonce());
    ASSERT_TRUE(send_all(fd, std::span(h).first(hs::kFrameBytes / 2)));
  }  // closed mid-frame
  EXPECT_TRUE(logged(kLinkRefusal, before + 1));
}

TEST_F(Stranger, DataLinkDropsASlowDrip) {
  const size_t before = count_of(job_log(), kLinkRefusal);
  UniqueFd fd = dial(g_job->link);
  const std::vector<uint8_t> key = ringlet::common::secret_key(g_job->secret);
  const hs::Frame h = hs::hello(as_rank1(key), 0, nonce());
  // One byte every 100 ms would take 11 s for the frame: the listener gives
  // a handshake 5 s, then drops it (the job's collectives run on meanwhile).
  const auto start = Clock::now();
  bool closed = false;
  for (uint8_t b : h) {
    if (!send_all(fd, std::span(&b, 1)) || closed_by_peer(fd, 100ms)) {
      closed = true;
      break;
    }
  }
  EXPECT_TRUE(closed) << "the whole frame was dripped in without the listener closing";
  EXPECT_LT(Clock::now() - start, 9s);
  EXPECT_TRUE(logged(kLinkRefusal, before + 1));
}

// ---- and the job? -------------------------------------------------------------

TEST_F(Stranger, ZzJobIsUnharmed) {
  std::ofstream(g_job->dir / "stop") << "1";
  int status = -1;
  const auto end = Clock::now() + 120s;
  pid_t done = 0;
  while ((done = ::waitpid(g_job->launcher, &status, WNOHANG)) == 0 && Clock::now() < end) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(done, g_job->launcher) << "the job did not finish:\n" << job_log();
  g_job->launcher = -1;
  const std::string log = job_log();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
  for (int r = 0; r < 2; ++r) {
    const std::string result = "RESULT rank " + std::to_string(r) + " collectives ";
    const auto at = log.find(result);
    ASSERT_NE(at, std::string::npos) << log;
    const std::string line = log.substr(at, log.find('\n', at) - at);
    EXPECT_NE(line.find(" wrong 0"), std::string::npos) << line;
  }
  // Every refusal was logged, and nothing else failed.
  EXPECT_GE(count_of(log, kLinkRefusal), 6u) << log;
  EXPECT_GE(count_of(log, kStoreRefusal), 5u) << log;
  EXPECT_EQ(log.find("job_rank failed"), std::string::npos) << log;
}

}  // namespace
