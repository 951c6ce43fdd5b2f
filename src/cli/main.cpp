// `structdiff`: the process. Everything it does is a command line (cli/command_line.h), or one of
// the self-checks the tests use.
#include <string>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <c10/util/Logging.h>

#include "cli/command_line.h"

using namespace structdiff::cli;

#ifdef __SANITIZE_ADDRESS__
// In the sanitizer build a request for more memory than the machine has must fail as in the
// normal build, so that the error path that names it runs (and is tested), instead of ASan
// ending the process with its allocation-size-too-big report.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif

int main(int argc, char** argv) {
#ifdef __GLIBC__
  // A training step frees and reallocates the same few-MB activations every step. glibc's
  // defaults hand that memory back to the kernel and fault it in again (about 15 % of a Sudoku
  // training step); keeping it in the heap avoids that. Setting the mmap threshold explicitly
  // matters: setting only the trim threshold switches off glibc's adaptive mmap threshold.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
  // The memory hook of `bench` makes c10 warn about blocks allocated before it started; only
  // errors are worth a user's attention here.
#ifdef C10_USE_GLOG
  FLAGS_minloglevel = 2;  // c10 forwards its level to glog only downwards
#else
  FLAGS_caffe2_log_level = 2;
#endif
  if (argc == 3 && std::string(argv[1]) == "--dry-run-lines") return check_command_lines(argv[2]);
  if (argc == 3 && std::string(argv[1]) == "--refused-lines") return check_refused_lines(argv[2]);
  if (argc == 2 && std::string(argv[1]) == "--list-value-options") return list_value_options();
  if (argc == 2 && std::string(argv[1]) == "--list-commands") return list_commands();
  return run_command_line(argc, argv, /*check_only=*/false);
}
