#!/usr/bin/env bash
# The shared object exports exactly what Slurm's loader and SPANK look up, needs no library Slurm
# processes lack (no libstdc++, libyaml-cpp or libslurm), and leaves undefined only the spank_* and
# slurm_* functions every Slurm process provides (plus versioned C library symbols).
set -uo pipefail
plugin=${1:?usage: $0 PATH/TO/spank_pipette.so}
failures=0
fail() { failures=$((failures + 1)); echo "FAIL: $*"; }

exported=$(nm -D --defined-only "$plugin" | awk '{print $3}' | sort | tr '\n' ' ')
expected="plugin_name plugin_type plugin_version slurm_spank_init slurm_spank_task_init slurm_spank_user_init spank_plugin_version "
[ "$exported" = "$expected" ] || fail "exported symbols: expected '$expected', got '$exported'"

# Weak references (w) are optional by definition; strong undefined ones must come from libc (the
# dynamic linker checks the version), from a library the plugin names (libhwloc, which slurmstepd
# loads too), or from the Slurm process (spank_*, slurm_*). Anything else would fail at dlopen
# inside slurmstepd, which drains the node.
provided=$(ldd "$plugin" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | xargs -r nm -D --defined-only 2>/dev/null |
  awk '{print $3}' | sed 's/@.*//' | sort -u)
unexpected=$(nm -D --undefined-only "$plugin" | awk '$1 == "U" {print $2}' | grep -v '@' | grep -vE '^(spank_|slurm_)' |
  sort -u | comm -23 - <(echo "$provided") || true)
[ -z "$unexpected" ] || fail "undefined symbols nothing provides: $unexpected"

needed=$(readelf -d "$plugin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
for library in libstdc++ libgcc_s libyaml-cpp libslurm; do
  case "$needed" in *"$library"*) fail "links $library dynamically (NEEDED: $needed)" ;; esac
done

echo "plugin_symbols_test: exported [$exported], NEEDED [$needed], $failures failed"
[ "$failures" -eq 0 ]
