#!/usr/bin/env bash
# Command 1 of the README: installs the dependencies, builds hangscope into build/, and runs
# the demo (a real two-rank gloo job hung in a barrier, captured with `hangscope dump`).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -eq 0 ]; then
  tools/install-deps.sh
elif command -v sudo >/dev/null; then
  sudo tools/install-deps.sh
else
  echo "setup.sh: installing packages needs root (or sudo)" >&2
  exit 1
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHANGSCOPE_WERROR=ON
cmake --build build -j "$(nproc)"
tools/demo.sh
