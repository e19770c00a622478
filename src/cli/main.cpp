// hangscope's entry point.
#include "hangscope/cli/commands.h"

int main(int argc, char** argv) {
  return hangscope::cli::run(argc, argv);
}
