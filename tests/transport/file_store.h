// A test-only KeyValue: one file per key in a temporary directory, shared by
// forked ranks. Writes go to a temporary name and are renamed into place, so a
// reader never sees half a value. Not the rendezvous store under test; it only
// lets transport tests run without core/.
#pragma once

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "ringlet/transport/transport.h"

namespace ringlet::transport::testing {

class FileStore final : public KeyValue {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    std::string path = path_of(key);
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(value.data()),
                static_cast<std::streamsize>(value.size()));
    }
    std::rename(tmp.c_str(), path.c_str());
  }

  std::vector<uint8_t> get(const std::string& key, Deadline deadline) override {
    std::string path = path_of(key);
    for (;;) {
      std::ifstream in(path, std::ios::binary);
      if (in) {
        return std::vector<uint8_t>(std::istreambuf_iterator<char>(in),
                                    std::istreambuf_iterator<char>());
      }
      if (Clock::now() >= deadline) throw Timeout(-1, "file store: key '" + key + "' never set");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  std::string path_of(std::string key) const {
    for (char& c : key) {
      if (c == '/') c = '%';
    }
    return dir_ + "/" + key;
  }

  std::string dir_;
};

}  // namespace ringlet::transport::testing
