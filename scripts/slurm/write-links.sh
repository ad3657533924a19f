#!/usr/bin/env bash
# Writes a link-measurement cache (format: topology/include/pipette/topology/link_cache.hpp) for
# the local test cluster's nodes n1..n4, measured "now": two fast pairs (n1-n3, n2-n4, as if each
# shared a leaf switch), cross pairs at about half, and one degraded pair (n1-n2). Slurm's node
# order puts n1 and n2 next to each other in every layout (a pipeline, a data-parallel ring), so
# the best placement differs from it. Used by the demo and the integration tests.
#   scripts/slurm/write-links.sh OUTPUT
set -euo pipefail
output=${1:?usage: $0 OUTPUT}
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
pair() { echo "  $1 $2: {measured_at: $now, nccl_version: 2.21.5, bandwidth_gb_per_s: $3, latency_us: $4}"; }
{
  echo "# Synthetic measurements of the local test cluster (scripts/slurm/write-links.sh)."
  echo "pipette_link_cache: 1"
  echo "nodes: {}"
  echo "pairs:"
  pair n1 n2 3.0 40.0
  pair n1 n3 48.0 8.0
  pair n1 n4 20.0 12.0
  pair n2 n3 21.0 12.0
  pair n2 n4 47.0 8.0
  pair n3 n4 22.0 12.0
} >"$output.tmp"
chmod 0644 "$output.tmp"
mv "$output.tmp" "$output"
