#pragma once

namespace drover::cli {

// Parses the command line and runs one command; returns the process exit status.
int Main(int argc, char** argv);

}  // namespace drover::cli
