// The `tessera` command line: one binary, one subcommand per tool.
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tessera <run|info|convert> [options]\n");
    return 2;
  }
  return 0;
}
