#!/usr/bin/env bash
# pgrun's benchmark: start-up cost, cancel and wait latency, timeout precision, idle
# cost, memory and scale, each next to GNU timeout, setsid and tini measured
# in the same run, as ratios. `bench/run.sh --quick` runs a few iterations of
# everything (CI uses it so the script cannot rot); figures from it are not
# meaningful. Nothing here asserts on time. PGRUN_BENCH_ONLY=scale,startup
# (names of the functions in bench/measure.py) runs a subset. `--compare OLD_PGRUN`
# measures the cancel-at-scale rows for an older build too, taking turns with this one.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v hyperfine >/dev/null || need+=(hyperfine)
command -v tini >/dev/null || need+=(tini)
command -v python3 >/dev/null || need+=(python3)
command -v setsid >/dev/null || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The release binary as shipped: static and not position-independent on
# Linux/glibc (no dynamic loader, no start-up relocations: fewer page faults).
# --target keeps RUSTFLAGS off build scripts and proc-macros.
host=$(rustc -vV | sed -n 's/^host: //p')
case "$host" in
  *-linux-gnu) export RUSTFLAGS="-C target-feature=+crt-static -C relocation-model=static" ;;
esac
cargo build --quiet --release --target "$host"
# The reference for the guard's cost: a static C program with and without
# one fork (bench/spawnwait.c); the row is left out without a C compiler.
reference=()
if command -v cc >/dev/null && cc -O2 -static -o "target/bench-spawnwait" bench/spawnwait.c 2>/dev/null; then
  reference=(--fork-reference target/bench-spawnwait)
fi
exec python3 bench/measure.py --pgrun "target/$host/release/pgrun" "${reference[@]}" "$@"
