// How the programs are linked against PyPI's libtorch. Its libtorch_cpu.so exports the copy of
// libstdc++'s std::filesystem that it linked statically (GCC 13's; pytorch/pytorch#133437). A
// program that meets libtorch before libstdc++ at link time binds some std::filesystem functions
// to torch's copy and the rest to its own libstdc++, and the two disagree on the iterators'
// internals: file-handling code crashed (SIGSEGV) on the GPU image. The build names libstdc++
// right before libtorch (src/CMakeLists.txt), so every program binds all of std::filesystem to
// its own libstdc++, shared or static.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace {

// The shared object (or this program) that holds `address`.
std::string object_of(const void* address) {
  Dl_info info{};
  if (::dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "(unknown)";
  return info.dli_fname;
}

bool is_torch(const std::string& object) {
  return object.find("libtorch") != std::string::npos || object.find("libc10") != std::string::npos;
}

TEST(RuntimeLinking, StdFilesystemIsNotTorchsCopy) {
  // Functions that both libstdc++ and PyPI's libtorch_cpu.so define, as this program calls them.
  namespace fs = std::filesystem;
  const std::pair<const char*, const void*> functions[] = {
      {"remove_all", reinterpret_cast<const void*>(
                         static_cast<std::uintmax_t (*)(const fs::path&)>(&fs::remove_all))},
      {"create_directories", reinterpret_cast<const void*>(
                                 static_cast<bool (*)(const fs::path&)>(&fs::create_directories))},
      {"status", reinterpret_cast<const void*>(
                     static_cast<fs::file_status (*)(const fs::path&)>(&fs::status))}};
  for (const auto& [name, address] : functions) {
    const std::string object = object_of(address);
    EXPECT_FALSE(is_torch(object)) << "std::filesystem::" << name << " is bound to " << object
                                   << ", libtorch's copy, not to this program's libstdc++";
  }
}

TEST(RuntimeLinking, DirectoryTreesAreMadeWalkedAndRemoved) {
  namespace fs = std::filesystem;
  const fs::path root =
      fs::temp_directory_path() / ("structdiff_linking_" + std::to_string(::getpid()));
  fs::create_directories(root / "a" / "b" / "c");
  for (const char* name : {"a/one.txt", "a/b/two.txt", "a/b/c/three.txt"}) {
    std::ofstream(root / name) << name;
  }
  int files = 0;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(root)) {
    files += entry.is_regular_file() ? 1 : 0;
  }
  EXPECT_EQ(files, 3);
  EXPECT_EQ((root / "a" / "b").parent_path().filename(), "a");
  EXPECT_EQ(fs::remove_all(root), 7u);  // 3 files, 4 directories
  EXPECT_FALSE(fs::exists(root));
}

}  // namespace
