#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "structdiff/ranks.h"

namespace structdiff::cli {
namespace {

// The ranks a --world-size run starts, for the signal handler to pass a SIGTERM on to.
std::vector<pid_t> g_ranks;

extern "C" void forward_termination(int) {
  for (const pid_t pid : g_ranks) ::kill(pid, SIGTERM);
}

}  // namespace

int launch_local_ranks(int argc, char** argv, int world_size) {
  std::vector<std::string> arguments;
  for (int i = 0; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--world-size") {
      ++i;
    } else if (word.rfind("--world-size=", 0) != 0) {
      arguments.push_back(word);
    }
  }
  std::vector<char*> child_argv;
  for (std::string& word : arguments) child_argv.push_back(word.data());
  child_argv.push_back(nullptr);
  const std::string port = std::to_string(train::free_loopback_port());
  for (int rank = 0; rank < world_size; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("cannot start rank " + std::to_string(rank));
    if (pid == 0) {
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(world_size).c_str(), 1);
      ::execv("/proc/self/exe", child_argv.data());
      std::perror("structdiff: cannot start a rank");
      std::_Exit(127);
    }
    g_ranks.push_back(pid);
  }
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, forward_termination);
  int exit_code = 0, running = world_size;
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    --running;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && exit_code == 0) {
      exit_code = code;
      const auto rank = std::find(g_ranks.begin(), g_ranks.end(), pid) - g_ranks.begin();
      std::cerr << "structdiff: rank " << rank << " of " << world_size << " ended with exit code "
                << code << (running > 0 ? "; stopping the others" : "") << "\n";
      for (const pid_t other : g_ranks) {
        if (other != pid) ::kill(other, SIGTERM);
      }
    }
  }
  return exit_code;
}

}  // namespace structdiff::cli
