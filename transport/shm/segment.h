// RAII shared-memory mapping. A Segment owns its mapping and, while it is
// still linked, the name it created: destroying a created segment that was
// never handed over unlinks it, so a failed connect leaves nothing behind.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace ringlet::transport::shm {

class Segment {
 public:
  // A new named segment, created exclusively with mode 0600 and registered
  // for cleanup on signals until unlink(). Throws Error naming the segment
  // when the name exists already (it is never replaced).
  static Segment create(const std::string& name, size_t bytes);
  // Maps an existing named segment of at least `bytes`.
  static Segment open(const std::string& name, size_t bytes);
  // A nameless segment (memfd). Its fd stays open for the segment's life, so
  // a process of the same user can map it through /proc/<pid>/fd/<fd>.
  static Segment anonymous(size_t bytes);
  static Segment open_of_process(pid_t pid, int fd, size_t bytes);

  Segment() = default;
  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Removes the name; the mapping stays valid. Called once every peer mapped it.
  void unlink();

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  const std::string& name() const { return name_; }

 private:
  static Segment map(int fd, size_t bytes, std::string name, bool linked, bool keep_fd);
  void release();

  std::byte* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;  // kept only for anonymous segments
  std::string name_;
  bool linked_ = false;  // we created the name and have not unlinked it yet
};

}  // namespace ringlet::transport::shm
