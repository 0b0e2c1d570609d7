#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include "cli/cli.h"
#include "exec/shim.h"

int main(int argc, char** argv) {
  // The run supervisor mode comes first: it must stay tiny and fast (no CLI parsing, no logging).
  if (argc > 1 && std::strcmp(argv[1], "__shim") == 0) return drover::RunShim(argc, argv);
  // Nothing reaches the C++ runtime's abort: an error drover did not expect is reported as one,
  // with what to send, and exits 3 like any other internal error.
  try {
    return drover::cli::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs(
        "drover: internal error: out of memory; the input is likely larger than drover can hold "
        "(a spec, a log or a reply): please report it with the command you ran\n",
        stderr);
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "drover: internal error: %s; please report it with the command you ran and "
                 "this message\n",
                 e.what());
  } catch (...) {
    std::fputs("drover: internal error (an unknown exception); please report it with the "
               "command you ran\n",
               stderr);
  }
  return 3;
}
