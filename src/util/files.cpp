// Files in and out: bounded reads, and writes that replace a file whole or not at all.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "structdiff/runtime.h"

namespace structdiff {

std::string read_bounded(const std::string& path, int64_t max_bytes, const std::string& what) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    throw std::invalid_argument(what + " " + path +
                                (errno == ENOENT ? std::string(" does not exist")
                                                 : " cannot be read: " + std::string(std::strerror(errno))));
  }
  if (S_ISDIR(info.st_mode)) throw std::invalid_argument(what + " " + path + " is a directory");
  const auto too_large = [&] {
    const std::string limit = max_bytes % (1 << 20) == 0
                                  ? std::to_string(max_bytes >> 20) + " MiB"
                                  : std::to_string(max_bytes) + " bytes";
    return std::invalid_argument(what + " " + path + " is larger than the " + limit + " a " +
                                 what + " may have");
  };
  if (S_ISREG(info.st_mode) && info.st_size > max_bytes) throw too_large();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::invalid_argument(what + " " + path + " cannot be read: " + std::strerror(errno));
  }
  std::string content;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    content.append(chunk, static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(content.size()) > max_bytes) throw too_large();
  }
  if (in.bad()) throw std::invalid_argument(what + " " + path + " could not be read to its end");
  return content;
}

std::string output_target(const std::string& path) {
  namespace fs = std::filesystem;
  constexpr int kMostLinks = 40;  // the kernel's own limit on links followed in one lookup
  fs::path target = path;
  for (int followed = 0; followed < kMostLinks; ++followed) {
    std::error_code error;
    if (!fs::is_symlink(target, error)) return target.string();
    const fs::path link = fs::read_symlink(target, error);
    if (error) throw std::invalid_argument("cannot write " + path + ": " + error.message());
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  throw std::invalid_argument("cannot write " + path + ": its symbolic links lead round in a loop");
}

void replace_file(const std::string& temporary, const std::string& path) {
  const auto fail = [&](const std::string& reason) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw std::runtime_error("cannot write " + path + ": " + reason);
  };
  const int descriptor = ::open(temporary.c_str(), O_RDONLY);
  if (descriptor < 0 || ::fsync(descriptor) != 0) {
    const std::string reason = std::strerror(errno);
    if (descriptor >= 0) ::close(descriptor);
    fail(reason);
  }
  ::close(descriptor);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) fail(std::strerror(errno));
}

void write_file_atomically(const std::string& given_path, const std::string& bytes) {
  const std::string path = output_target(given_path);
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    errno = 0;
    std::ofstream out(temporary, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      // The stream keeps no reason; errno holds the last system call's (ENOENT, ENOSPC, ...).
      const std::string reason = errno != 0 ? std::strerror(errno) : "the write failed";
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      throw std::runtime_error("cannot write " + path + ": " + reason);
    }
  }
  replace_file(temporary, path);
}

}  // namespace structdiff
