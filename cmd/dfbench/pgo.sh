#!/usr/bin/env bash
# Regenerates cmd/dfbench/default.pgo, the CPU profile the Go toolchain
# optimises dfbench with (profile-guided optimisation: hot calls inlined,
# hot indirect calls devirtualised). The profile is taken from a build
# without it, over a representative mix: every pipeline of `dfbench run`
# unpaced, and the windowed Nexmark queries, each a few seconds, merged.
#
#   cmd/dfbench/pgo.sh            # from the repository's root
#
# Run it when the data path changes; docs/perf.md says what it gains.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -pgo=off -o "$tmp/dfbench" ./cmd/dfbench
for p in passthrough map-filter keyed-count window join; do
  "$tmp/dfbench" run --pipeline "$p" --keys 100000 --parallelism 2 --duration 4s \
    --cpuprofile "$tmp/run-$p.pprof" >/dev/null
done
for q in q5 q7 q8; do
  "$tmp/dfbench" nexmark --query "$q" --events 10000000 --parallelism 2 \
    --cpuprofile "$tmp/nexmark-$q.pprof" >/dev/null
done
go tool pprof -proto "$tmp"/*.pprof > cmd/dfbench/default.pgo
echo "wrote cmd/dfbench/default.pgo ($(stat -c %s cmd/dfbench/default.pgo) bytes)"
