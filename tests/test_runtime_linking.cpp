// How the programs are linked against PyPI's libtorch. Its libtorch_cpu.so exports the copy of
// libstdc++'s std::filesystem that it linked statically (GCC 13's; pytorch/pytorch#133437). A
// program whose libraries name libtorch before libstdc++ binds some std::filesystem functions to
// torch's copy and the rest to the system libstdc++ its headers belong to, and the two disagree on
// the iterators' internals: remove_all of a directory tree crashed (SIGSEGV) there. The build
// names libstdc++ first (cmake/torch_from_python.cmake), so every program and library binds all
// of std::filesystem to the libstdc++ it was compiled for.
#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace {

// The shared object that provides `symbol` to this program (first in the global lookup order).
std::string provider_of(const char* symbol) {
  void* address = ::dlsym(RTLD_DEFAULT, symbol);
  if (address == nullptr) return "(not found)";
  Dl_info info{};
  if (::dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "(unknown)";
  return info.dli_fname;
}

TEST(RuntimeLinking, StdFilesystemBindsToTheSystemLibstdcxx) {
  // Functions that both libstdc++ and PyPI's libtorch_cpu.so export: the path parser, the
  // iterator remove_all walks with, and remove_all itself.
  for (const char* symbol : {"_ZNSt10filesystem7__cxx114path14_M_split_cmptsEv",
                             "_ZNSt10filesystem7__cxx1128recursive_directory_iteratorppEv",
                             "_ZNSt10filesystem10remove_allERKNS_7__cxx114pathE"}) {
    const std::string provider = provider_of(symbol);
    EXPECT_NE(provider.find("libstdc++"), std::string::npos)
        << symbol << " is bound to " << provider << ", not to libstdc++";
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
