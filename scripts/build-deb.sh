#!/usr/bin/env bash
# Builds Pipette's Debian packages (pipette-slurm, and pipette-probe where CUDA and NCCL are found)
# for the Slurm whose libslurm-dev is installed, from a clean copy of the source (the files git
# tracks or would track), and puts them in OUTDIR (default: ./packages).
#   scripts/build-deb.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out_dir=$(mkdir -p "${1:-packages}" && cd "${1:-packages}" && pwd)
work=$(mktemp -d /tmp/pipette-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT

git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$work" --one-top-level=src
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DPIPETTE_BUILD_TESTS=OFF -DPIPETTE_BUILD_BENCH=OFF >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j"$(nproc)" >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
(cd "$work/build" && cpack -G DEB >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
mv "$work"/build/*.deb "$out_dir/"
ls "$out_dir"/*.deb
