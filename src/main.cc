#include <cstring>

#include "cli/cli.h"
#include "exec/shim.h"

int main(int argc, char** argv) {
  // The run supervisor mode comes first: it must stay tiny and fast (no CLI parsing, no logging).
  if (argc > 1 && std::strcmp(argv[1], "__shim") == 0) return drover::RunShim(argc, argv);
  return drover::cli::Main(argc, argv);
}
