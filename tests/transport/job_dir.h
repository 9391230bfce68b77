// What every transport test job needs besides its forked ranks
// (tests/common/forked_ranks.h): a directory and a job id of its own, and a
// look at /dev/shm for segments the job left behind.
#pragma once

#include "ringlet/common/random.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace ringlet::transport::testing {

// A fresh directory for a FileStore and a job id no other test shares.
struct JobDir {
  std::string dir;
  std::string job_id;
  // Carriers refuse to start without a job secret.
  std::string secret = ringlet::common::random_hex(32);
  JobDir() {
    char path[] = "/tmp/ringlet-transport-test-XXXXXX";
    dir = ::mkdtemp(path);
    static int counter = 0;
    job_id = "t" + std::to_string(::getpid()) + "x" + std::to_string(counter++);
  }
  ~JobDir() { std::system(("rm -rf '" + dir + "'").c_str()); }
};

// Names in /dev/shm that belong to `job_id`: must be none after every test.
inline std::vector<std::string> leftover_segments(const std::string& job_id) {
  std::vector<std::string> names;
  std::string prefix = "ringlet-" + job_id + "-";
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) {
      if (std::string(e->d_name).rfind(prefix, 0) == 0) names.push_back(e->d_name);
    }
    ::closedir(d);
  }
  return names;
}

}  // namespace ringlet::transport::testing
