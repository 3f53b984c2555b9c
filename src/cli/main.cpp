#include "cli/commands.h"

int main(int argc, char** argv) { return imgcheck::cli::Main(argc, argv); }
