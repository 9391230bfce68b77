#include "shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "ringlet/transport/transport.h"
#include "shm/segment_registry.h"

namespace ringlet::transport::shm {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& name) {
  throw Error(-1, "shm: " + what + " '" + name + "': " + std::strerror(errno));
}

}  // namespace

Segment Segment::map(int fd, size_t bytes, std::string name, bool linked, bool keep_fd) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int saved = errno;
  if (!keep_fd) ::close(fd);
  if (p == MAP_FAILED) {
    if (keep_fd) ::close(fd);
    if (linked) {
      ::shm_unlink(name.c_str());
      forget_segment(name.c_str());
    }
    errno = saved;
    fail("mmap", name);
  }
  Segment s;
  s.data_ = static_cast<std::byte*>(p);
  s.size_ = bytes;
  s.fd_ = keep_fd ? fd : -1;
  s.name_ = std::move(name);
  s.linked_ = linked;
  return s;
}

Segment Segment::create(const std::string& name, size_t bytes) {
  // Registered before it exists: a signal landing between shm_open and the
  // registration would otherwise leave the name behind.
  register_segment(name.c_str());
  // Exclusively, readable by this user only. A segment of the same name is
  // never replaced: it may belong to another job (or to an attacker waiting
  // for this name), and unlinking it would break that job or hand this one a
  // segment someone else can map.
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    int saved = errno;
    forget_segment(name.c_str());
    if (saved == EEXIST) {
      throw Error(-1, "shm: shared-memory segment '" + name +
                          "' already exists, left by another job or a crashed run with the same "
                          "job id; it is not replaced (remove /dev/shm" + name +
                          " if no job uses it, or give this job another RINGLET_JOB_ID)");
    }
    errno = saved;
    fail("shm_open(create)", name);
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int saved = errno;
    ::close(fd);
    ::shm_unlink(name.c_str());
    forget_segment(name.c_str());
    errno = saved;
    fail("ftruncate", name);
  }
  return map(fd, bytes, name, /*linked=*/true, /*keep_fd=*/false);
}

Segment Segment::open(const std::string& name, size_t bytes) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) fail("shm_open", name);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    ::close(fd);
    errno = EINVAL;
    fail("segment smaller than expected", name);
  }
  return map(fd, bytes, name, /*linked=*/false, /*keep_fd=*/false);
}

Segment Segment::anonymous(size_t bytes) {
  int fd = ::memfd_create("ringlet", MFD_CLOEXEC);
  if (fd < 0) fail("memfd_create", "ringlet");
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    ::close(fd);
    fail("ftruncate", "memfd");
  }
  return map(fd, bytes, "memfd", /*linked=*/false, /*keep_fd=*/true);
}

Segment Segment::open_of_process(pid_t pid, int fd, size_t bytes) {
  std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  int own = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (own < 0) fail("open", path);
  return map(own, bytes, path, /*linked=*/false, /*keep_fd=*/false);
}

Segment::~Segment() { release(); }

Segment::Segment(Segment&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      name_(std::move(other.name_)),
      linked_(std::exchange(other.linked_, false)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    name_ = std::move(other.name_);
    linked_ = std::exchange(other.linked_, false);
  }
  return *this;
}

void Segment::unlink() {
  if (!linked_) return;
  ::shm_unlink(name_.c_str());
  forget_segment(name_.c_str());
  linked_ = false;
}

void Segment::release() {
  unlink();
  if (data_ != nullptr) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  fd_ = -1;
}

}  // namespace ringlet::transport::shm
