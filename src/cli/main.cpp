#include "cli/commands.h"

int main(int argc, char** argv) { return imgcheck::cli::ExitFast(imgcheck::cli::Main(argc, argv)); }
