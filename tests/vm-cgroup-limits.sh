#!/bin/sh
# Run the cgroup-limit tests (tests/cgroup_limits.rs, #[ignore]d on a host
# without the memory, pids and cpu controllers) for real: build the test
# binary here, then run it in one boot of a unified-cgroup-v2 VM, as root,
# with the controllers enabled for its cgroup (see the VM tool's NOTES.md).
# PGRUN_VM names the VM runner (default: ../shared/tools/vm/run-in-vm.sh
# next to the checkout). Exit status: the test binary's.
set -eu
cd "$(dirname "$0")/.."
vm=${PGRUN_VM:-$(cd .. && pwd)/shared/tools/vm/run-in-vm.sh}
[ -x "$vm" ] || { echo "vm-cgroup-limits: no VM runner at $vm (set PGRUN_VM)" >&2; exit 125; }
bin=$(cargo test --no-run --test tests 2>&1 | sed -n 's/.*Executable tests\/tests.rs (\(.*\))$/\1/p' | tail -n 1)
[ -n "$bin" ] || { echo "vm-cgroup-limits: cannot find the test binary" >&2; exit 125; }
# Absolute, wherever the target folder is (CARGO_TARGET_DIR).
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
exec "$vm" --timeout 900 --mem 2G -- "$bin" --ignored --test-threads=1 cgroup_limits::
