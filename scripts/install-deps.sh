#!/usr/bin/env bash
# Installs the Debian 12 packages that building, testing and running Pipette need.
# Idempotent: packages already present are skipped by apt. Must run as root.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ccache
  libhwloc-dev hwloc
  libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libslurm-dev slurmctld slurmd slurm-client munge
  clang-14 libclang-rt-14-dev valgrind
  libxml2-utils python3
  dpkg-dev fakeroot lintian man-db
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run this script as root" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
# The Debian slurm packages start their daemons on install where systemd runs;
# Pipette's test cluster starts its own, so leave any system ones stopped.
echo "install-deps: installed ${missing[*]}"
