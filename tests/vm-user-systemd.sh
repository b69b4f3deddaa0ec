#!/bin/sh
# Run the user-systemd tests (tests/user_systemd.rs, #[ignore]d on a host
# without a systemd user manager) for real: build the test binary here, then
# run it in one boot of a VM with a real systemd and a user manager, as user
# tester (uid 1000), whose login cgroup is not delegated (see the VM tool's
# SYSTEMD-NOTES.md). Then, in the same boot, start-up in tree mode against
# cgroup mode through the user manager, paired (bench/README.md).
# PGRUN_USER_VM names the VM runner (default:
# ../shared/tools/vm/run-user-systemd.sh next to the checkout). Exit status:
# the test binary's.
set -eu
cd "$(dirname "$0")/.."
vm=${PGRUN_USER_VM:-$(cd .. && pwd)/shared/tools/vm/run-user-systemd.sh}
[ -x "$vm" ] || { echo "vm-user-systemd: no VM runner at $vm (set PGRUN_USER_VM)" >&2; exit 125; }
bin=$(cargo test --no-run --test tests 2>&1 | sed -n 's/.*Executable tests\/tests.rs (\(.*\))$/\1/p' | tail -n 1)
[ -n "$bin" ] || { echo "vm-user-systemd: cannot find the test binary" >&2; exit 125; }
# Absolute, wherever the target folder is (CARGO_TARGET_DIR).
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
cargo build --release -q
target=${CARGO_TARGET_DIR:-$PWD/target}
case $target in /*) ;; *) target=$PWD/$target ;; esac
# The target folder is seen in the VM too when it lies outside the checkout.
case $target/ in "$PWD"/*) target_dir= ;; *) target_dir=$target ;; esac
work=$(mktemp -d)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
cat > "$work/in-vm.sh" <<SCRIPT
set -u
export TMPDIR=\$HOME/tmp
mkdir -p "\$TMPDIR"
"$bin" --ignored --test-threads=1 user_systemd::
status=\$?
# Start-up, tree mode against cgroup mode through the user manager, taking
# turns (milliseconds per run, median of 15 pairs).
for i in \$(seq 15); do
  for mode in tree cgroup; do
    a=\$(date +%s%N); "$target/release/pgrun" --contain \$mode -- true; b=\$(date +%s%N)
    echo "\$mode \$(( (b - a) / 1000 ))"
  done
done | sort -k1,1 -k2n | awk '{ t[\$1] = t[\$1] " " \$2 } END { for (m in t) { n = split(substr(t[m], 2), v, " "); printf "start-up, --contain %s: median %.1f ms of %d runs\n", m, v[int((n + 1) / 2)] / 1000, n } }'
exit \$status
SCRIPT
chmod 644 "$work/in-vm.sh"
"$vm" --timeout 900 --rodir "$PWD" ${target_dir:+--rodir "$target_dir"} --rodir "$work" -- sh "$work/in-vm.sh"
