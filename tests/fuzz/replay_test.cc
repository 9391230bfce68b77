// Replays a fuzz target's seed corpus and every input that once crashed it
// (tests/fuzz/regressions/<target>/) through the target's own entry point, in
// the ordinary build: each must be refused or accepted cleanly, never crash
// and never throw past the target, which lets through only the parser's
// documented refusals.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = RINGLET_FUZZ_ROOT;
const std::string kTarget = RINGLET_FUZZ_TARGET;

// Runs every file under `dir` (none if it does not exist); returns how many.
int replay(const fs::path& dir) {
  if (!fs::is_directory(dir)) return 0;
  int count = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream file(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(file), {}};
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(LLVMFuzzerTestOneInput(bytes.data(), bytes.size()));
    ++count;
  }
  return count;
}

TEST(FuzzReplay, SeedCorpus) {
  EXPECT_GT(replay(kRoot / "corpus" / kTarget), 0) << "no seed inputs for " << kTarget;
}

TEST(FuzzReplay, Regressions) { replay(kRoot / "regressions" / kTarget); }

}  // namespace
