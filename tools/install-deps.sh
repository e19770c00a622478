#!/usr/bin/env bash
# Installs everything hangscope needs to build and test on Debian 12 (run as root).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake pkg-config git clang-format
  # the fuzz tier (tests/fuzz, tools/fuzz/run.sh): clang and libFuzzer's runtime
  # (libclang_rt.fuzzer, with the ASan/UBSan runtimes)
  clang libclang-rt-14-dev
  # libraries the build links against
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  libunwind-dev libelf-dev libre2-dev
  # `hangscope watch --metrics` (src/watch/metrics.cpp): prometheus-cpp's core and pull, which
  # bring Debian's civetweb
  prometheus-cpp-dev
  # real targets and peers for tests and benchmarks
  python3 python3-torch python3-setproctitle python3.11-dbg elfutils gdb graphviz
  # asyncio tasks on uvloop (tests/integration/asyncio_tasks_test.cpp): vLLM serves on it
  python3-uvloop
  procps iproute2 util-linux psmisc openssl libssl-dev
  # the system calls a capture makes, seen from outside (tests/integration/sockets_test.cpp:
  # `dump` reads no socket without --sockets; gloo_capture_test.cpp: no file opened while
  # threads are held)
  strace
  # deployment paths (tests/deploy): systemd-analyze, a single-machine Slurm, the manifest's
  # YAML, zsh completions, the man page
  systemd slurm-wlm python3-yaml zsh man-db groff-base
  # a real Prometheus server scraping `hangscope watch --metrics`, and curl for its query API
  # (tests/deploy/watch_prometheus_test.sh runs /usr/bin/prometheus itself, on loopback with
  # temporary storage; under systemd the package also enables prometheus.service on :9090:
  # `systemctl disable --now prometheus` if this machine should not run one)
  prometheus curl
  # the .deb (cpack -G DEB: dpkg-shlibdeps, file) and its install test on a fresh Debian 12
  # root (tests/deploy/deb_package_test.sh)
  dpkg-dev file debootstrap wget
)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: must run as root (apt-get); try: sudo $0" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps.sh: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps.sh: installing ${missing[*]}"
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
