#include "cli/cli.h"

namespace drover::cli {

int Main(int argc, char** argv) { return 0; }

}  // namespace drover::cli
