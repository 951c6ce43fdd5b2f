// Process-wide runtime settings and measurement helpers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace structdiff {

struct DebugInfoScope;

// All cores of this machine.
int default_threads();
// Sets libtorch's intra-op thread count (libtorch otherwise uses 1 thread here).
void set_threads(int threads);

// Restores libtorch's default CPU generator on destruction. libtorch's modules draw their default
// initial weights from that generator and take no other; nothing else in structdiff draws from it.
// A guard keeps building a model from shifting anyone's stream, and the seeded form gives the
// model's initial weights their own seed: they depend on that seed alone.
class DefaultGeneratorGuard {
 public:
  DefaultGeneratorGuard();
  explicit DefaultGeneratorGuard(uint64_t initial_weights_seed);
  ~DefaultGeneratorGuard();
  DefaultGeneratorGuard(const DefaultGeneratorGuard&) = delete;
  DefaultGeneratorGuard& operator=(const DefaultGeneratorGuard&) = delete;

 private:
  std::shared_ptr<void> state_;  // the saved state tensor, kept opaque to spare includes
};

// Memory the system can still give this process (MemAvailable of /proc/meminfo), or -1 when
// unknown.
int64_t available_memory_bytes();
// Throws std::invalid_argument "WHAT needs 74.5 GB of memory, 23.1 GB available" when `bytes`
// exceed the available memory: sizes are checked before allocating, so a huge request fails at
// once instead of swapping, hanging or being killed.
void require_memory(double bytes, const std::string& what);

// The whole content of the file at `path` (a regular file, a pipe or a device), read up to
// `max_bytes`: a reader never reads without end (/dev/zero) nor fills the memory with one input.
// Throws std::invalid_argument naming `what` and the path for a file that is missing, a
// directory, unreadable, or larger than the limit ("... is larger than the 256 MiB a text file
// may have").
std::string read_bounded(const std::string& path, int64_t max_bytes, const std::string& what);

// The file a write to `path` lands on: through symbolic links to their final target, as the
// shell's `>` does, so that a link (latest.pt -> run3.pt) stays a link and its target gets the new
// content. Throws std::invalid_argument for links that lead round in a loop.
std::string output_target(const std::string& path);
// Replaces the file at `path` by `temporary`, which the caller wrote in full beside it: flushed to
// disk, then renamed over `path`, so that a reader finds the old file or the new one, never a
// part. On failure `temporary` is removed, the old file stays, and std::runtime_error names path.
void replace_file(const std::string& temporary, const std::string& path);
// `bytes` into a temporary beside output_target(path), then replace_file onto it.
void write_file_atomically(const std::string& path, const std::string& bytes);

// Tracks CPU tensor allocations made on this thread while alive, through libtorch's
// memory-reporting hook; reports the peak of bytes allocated beyond the level at construction.
class PeakMemoryTracker {
 public:
  PeakMemoryTracker();
  ~PeakMemoryTracker();
  PeakMemoryTracker(const PeakMemoryTracker&) = delete;
  PeakMemoryTracker& operator=(const PeakMemoryTracker&) = delete;

  int64_t peak_bytes() const;
  int64_t current_bytes() const;
  // Makes the current level the new baseline.
  void reset();

 private:
  struct Reporter;
  std::shared_ptr<Reporter> reporter_;
  std::unique_ptr<DebugInfoScope> scope_;
};

}  // namespace structdiff
