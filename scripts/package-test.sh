#!/usr/bin/env bash
# Builds Pipette's Debian packages from a clean copy of the source (scripts/build-deb.sh, which
# deletes that copy and its build afterwards), checks them with lintian, installs them with
# `apt-get install ./….deb`, and tests what was installed: the files and conffiles, man pages, `pipette --version` against the plugin's
# version, the plugin's real-Slurm integration tests (tests/slurm/*_test.sh) with the installed
# plugin, and a job planned through the installed plugstack.conf.d snippet and site file.
# Needs root. CI runs it (CI=true scripts/test.sh).
#
# It leaves the machine as it found it, and checks that it did: the packages are purged, the
# Slurm daemons its clusters started are stopped, and /etc/slurm holds the same files with the same
# contents (a pipette.yaml or plugstack.conf.d/pipette.conf already there is moved aside for the
# test, so that dpkg installs its own and the purge does not delete the site's, and put back).
# Its clusters use their own directories and random ports, like the build-tree Slurm tests
# (tests/slurm/lib.sh), and those load the plugin with their own config=, so the two never meet.
# Two package tests at once would install and purge each other's packages: they take turns.
# It refuses to run where pipette-slurm or pipette-probe is installed (the purge would remove it).
# PACKAGE_TEST_DEBS=DIR tests the .deb files in DIR instead of building them.
set -euo pipefail
cd "$(dirname "$0")/.."
source_dir=$(pwd)

if [ "$(id -u)" -ne 0 ]; then
  echo "package-test: needs root (apt-get install, and slurmd runs jobs as their users)" >&2
  exit 1
fi
bash scripts/install-deps.sh

# fd 9 holds the lock; the Slurm daemons started below must not inherit it (9>&-).
exec 9>/run/lock/pipette-package-test.lock
flock -w 1800 9 || { echo "package-test: another package test held the lock for 30 minutes" >&2; exit 1; }
packages=(pipette-slurm pipette-probe)
for package in "${packages[@]}"; do
  if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q ' installed$'; then
    echo "package-test: $package is installed here and the test would purge it; run it elsewhere, or 'apt-get purge $package' first" >&2
    exit 1
  fi
done
site_files=(/etc/slurm/pipette.yaml /etc/slurm/plugstack.conf.d/pipette.conf)
for file in "${site_files[@]}"; do
  if [ -e "$file.package-test-saved" ]; then
    echo "package-test: $file.package-test-saved is left from an interrupted run; move it back to $file first" >&2
    exit 1
  fi
done

# What must look the same afterwards: the installed packages and every file under /etc/slurm.
machine_state() {
  dpkg-query -W -f='${Package} ${Status}\n' | grep ' installed$' | cut -d' ' -f1
  find /etc/slurm -exec sh -c 'for f; do if [ -f "$f" ]; then sha256sum "$f"; else echo "$f"; fi; done' sh {} + | sort
}
state_before=$(machine_state)

work=$(mktemp -d /tmp/pipette-package.XXXXXX)
chmod 0755 "$work"
saved=()
installed=()
cleanup() {
  local status=$? file
  if [ -n "${SLURM_CONF:-}" ]; then PIPETTE_SLURM_DIR=$work/cluster bash scripts/slurm-cluster.sh stop >/dev/null 2>&1 || true; fi
  if [ "${#installed[@]}" -gt 0 ]; then apt-get purge -y -q "${installed[@]}" >/dev/null 2>&1 || true; fi
  for file in "${saved[@]}"; do mv "$file.package-test-saved" "$file"; done
  # A daemon of one of this test's clusters (all under $work) would name $work on its command line.
  if pgrep -f -- "$work/" >/dev/null; then
    echo "FAIL: processes left running:"; pgrep -a -f -- "$work/"; status=1
  fi
  if [ "$(machine_state)" != "$state_before" ]; then
    echo "FAIL: the packages installed or /etc/slurm differ from before the test:"
    diff <(echo "$state_before") <(machine_state) || true
    status=1
  fi
  if [ "$status" -eq 0 ]; then rm -rf "$work"; else echo "package-test: logs kept in $work"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP
for file in "${site_files[@]}"; do
  if [ -e "$file" ]; then
    mv "$file" "$file.package-test-saved"
    saved+=("$file")
  fi
done
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# ---- build from a clean copy of the source (or take the packages in PACKAGE_TEST_DEBS)
if [ -n "${PACKAGE_TEST_DEBS:-}" ]; then
  mkdir -p "$work/debs" && cp "$PACKAGE_TEST_DEBS"/*.deb "$work/debs/"
else
  bash scripts/build-deb.sh "$work/debs"
fi

# ---- lintian: errors and warnings fail (justified exceptions are shipped as overrides)
lintian --tag-display-limit 0 "$work"/debs/*.deb 2>&1 | grep -v 'running with root privileges' >"$work/lintian.log" || true
if grep -qE '^[EW]: ' "$work/lintian.log"; then fail "lintian:"; cat "$work/lintian.log"; else pass "lintian: no errors or warnings"; fi

# ---- install (build-deb.sh has already removed its copy of the source and its build tree)
for deb in "$work"/debs/*.deb; do installed+=("$(dpkg-deb -f "$deb" Package)"); done
apt-get install -y -q "$work"/debs/*.deb >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; exit 1; }
pass "apt-get install ${installed[*]}"

plugin_dir=$(dpkg -L pipette-slurm | grep '/spank_pipette\.so$' | xargs -r dirname)
plugin=$plugin_dir/spank_pipette.so
[ -f "$plugin" ] && pass "plugin installed at $plugin" || fail "pipette-slurm installs no spank_pipette.so"
[ "$plugin_dir" = /usr/lib/x86_64-linux-gnu/slurm-wlm ] || fail "plugin in $plugin_dir, not Slurm's plugin directory"
for file in /etc/slurm/pipette.yaml /etc/slurm/plugstack.conf.d/pipette.conf; do
  dpkg-query -W -f='${Conffiles}\n' pipette-slurm | grep -q " $file " && pass "$file is a conffile" ||
    fail "$file is not a conffile of pipette-slurm"
done
for file in /usr/bin/pipette /usr/share/pipette/models/llama2-7b.yaml /usr/share/pipette/example-cluster/links.yaml; do
  [ -e "$file" ] && pass "installed $file" || fail "$file is not installed"
done

# ---- man pages render, and say what the programs say
for page in pipette spank_pipette pipette-probe; do
  if ! dpkg -S "/usr/share/man/man*/$page.*" >/dev/null 2>&1; then
    [ "$page" = pipette-probe ] && ! dpkg -s pipette-probe >/dev/null 2>&1 && continue
    fail "no man page for $page"
    continue
  fi
  if MANWIDTH=80 man --warnings=w "$page" >"$work/$page.man" 2>"$work/$page.man-warnings" && [ ! -s "$work/$page.man-warnings" ]; then
    pass "man $page renders"
  else
    fail "man $page:"; cat "$work/$page.man-warnings"
  fi
done
if [ -s "$work/pipette.man" ]; then
  while read -r command; do
    grep -qF -- "pipette $command" "$work/pipette.man" || fail "man pipette does not document 'pipette $command'"
  done < <(pipette --help | awk -F '  +' '/^commands:/ {on = 1; next} on && !NF {exit} on {print $2}')
fi

# ---- one version everywhere
version=$(pipette --version 2>/dev/null | awk '{print $NF}') || true
[ -n "$version" ] || { fail "pipette --version printed no version"; version=unknown; }
package_version=$(dpkg-query -W -f='${Version}' pipette-slurm)
[[ "$package_version" == "$version+slurm"* ]] && pass "package $package_version carries pipette $version" ||
  fail "package version $package_version does not start with pipette --version's $version"
if dpkg -s pipette-probe >/dev/null 2>&1; then
  [ "$(pipette-probe --version | awk '{print $NF}')" = "$version" ] && pass "pipette-probe --version is $version" ||
    fail "pipette-probe --version differs from pipette --version ($version)"
fi

# ---- the plugin's integration tests, against the installed plugin; their clusters under $work
mkdir -p "$work/tmp" && chmod 1777 "$work/tmp"
for test in tests/slurm/*_test.sh; do
  [ -e "$test" ] || continue
  status=0
  TMPDIR=$work/tmp bash "$test" "$plugin" "$version" >"$work/$(basename "$test").log" 2>&1 9>&- || status=$?
  case $status in
    0) pass "$test with the installed plugin" ;;
    77) fail "$test skipped" ;;
    *) fail "$test with the installed plugin:"; tail -40 "$work/$(basename "$test").log" ;;
  esac
done

# ---- a job planned through the installed snippet and site file, after the one edit every site
# makes to it (the GPU model: these test nodes' fake GPUs show none)
sed -i 's/^gpu: ""/gpu: H100-SXM/' /etc/slurm/pipette.yaml
export PIPETTE_SLURM_DIR=$work/cluster SLURM_CONF=$work/cluster/etc/slurm.conf
plugstack_line=$(grep -v '^[[:space:]]*#' /etc/slurm/plugstack.conf.d/pipette.conf | grep -m1 spank_pipette || true)
if [ -z "$plugstack_line" ]; then
  fail "the installed plugstack.conf.d/pipette.conf loads nothing"
else
  PIPETTE_SLURM_PLUGSTACK=$plugstack_line bash scripts/slurm-cluster.sh start >"$work/cluster.log" 2>&1 9>&- ||
    { fail "cluster with the installed snippet did not start"; cat "$work/cluster.log"; }
  job=$(sbatch --parsable -N2 --ntasks-per-node=8 --gres=gpu:8 --pipette=plan --pipette-model=llama2-7b -o "$work/job.out" \
    --wrap 'echo "status=$PIPETTE_STATUS tp=$PIPETTE_TP pp=$PIPETTE_PP dp=$PIPETTE_DP"' 2>"$work/sbatch.err") ||
    { fail "sbatch with the installed plugin:"; cat "$work/sbatch.err"; }
  for _ in $(seq 600); do
    state=$(scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z]*' | cut -d= -f2)
    case $state in PENDING | CONFIGURING | RUNNING | COMPLETING | "") sleep 0.1 ;; *) break ;; esac
  done
  if grep -q '^status=ok tp=[0-9]' "$work/job.out" 2>/dev/null; then
    pass "job planned with the installed plugin and site file: $(cat "$work/job.out")"
  else
    fail "job through the installed snippet (state $state):"; cat "$work/job.out" 2>/dev/null || true
  fi
  bash scripts/slurm-cluster.sh stop >/dev/null 2>&1 || true
fi

if [ "$failures" -ne 0 ]; then
  echo "package-test: $failures check(s) failed"
  exit 1
fi
echo "package-test: all checks passed"
