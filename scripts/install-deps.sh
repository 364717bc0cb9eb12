#!/usr/bin/env bash
# Install the Debian packages aspen needs to build, test and benchmark.
# Idempotent: does nothing (and prints nothing) when everything is already installed.
set -euo pipefail

# llvm-19 for llvm-symbolizer-19: the sanitizer presets name it, so their
# reports show file:line rather than bare addresses. libc++-19-dev for
# consumer.add_subdirectory_libcxx (aspen built and used with clang's
# standard library).
# lld-19: the clang presets link with it (-fuse-ld=lld), about half the
# time of ld.bfd for the sanitizer builds' test programs.
packages=(cmake ninja-build g++ clang-19 libclang-rt-19-dev llvm-19 lld-19 libgtest-dev libgmock-dev
          libbenchmark-dev libtbb-dev libboost-fiber-dev spin libasio-dev libc++-19-dev libc++abi-19-dev)

missing=()
for p in "${packages[@]}"; do
  # dpkg-query is local and fast; only hit the network when something is missing.
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

# Root (e.g. CI containers) often has no sudo; everyone else needs it.
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Lock::Timeout waits for another apt/dpkg run instead of failing immediately.
$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
$sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
