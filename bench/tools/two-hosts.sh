#!/usr/bin/env bash
# Two hosts, simulated on one machine: a 2-rank MPI job of the digits example whose ranks live in
# two network namespaces joined by a veth pair, so that they talk over TCP only (no shared
# memory, no loopback between them), each with its own hostname and its own working directory,
# where the other host's directory is hidden. The log directory is a folder both see, as a
# cluster's shared filesystem would be.
#
# It checks that
# - the job trains (rank 1 is started by mpirun through the namespace, as over ssh);
# - Ctrl-C on mpirun (SIGINT) stops both ranks with a checkpoint, and a resume ends with the same
#   statistics, to the last bit, as an uninterrupted run of the two hosts;
# - the non-chief's working directory holds no file afterwards, and the chief's holds none
#   either: every file of the run is in the log directory.
#
# What it does not prove: the namespaces share one kernel, one clock and one filesystem (the
# "shared filesystem" is a local folder, not NFS with its caching and its locks), the link has
# no real latency, loss or bandwidth limit, and both ranks run the same binary from the same path.
#
# Usage, as root, with openmpi-bin and iproute2 installed:
#   cargo build --release -p stoker-examples --bin digits --features mpi
#   bash bench/tools/two-hosts.sh [path/to/digits]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIGITS=$(realpath "${1:-$ROOT/target/release/digits}")
EPOCHS=${EPOCHS:-30}
A=stoker-host-a
B=stoker-host-b
NET=10.231.0
WORK=$(mktemp -d /tmp/stoker-two-hosts.XXXXXX)

cleanup() {
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || { echo "two-hosts: run as root (ip netns)"; exit 2; }
if "$DIGITS" --mpi --epochs 1 --log-dir "$WORK/probe" 2>&1 | grep -q "needs the example built"; then
    echo "two-hosts: $DIGITS lacks MPI: cargo build --release -p stoker-examples --bin digits --features mpi"
    exit 2
fi

# The two hosts and the wire between them.
ip netns del "$A" 2>/dev/null || true
ip netns del "$B" 2>/dev/null || true
ip netns add "$A"
ip netns add "$B"
ip link add veth-a netns "$A" type veth peer name veth-b netns "$B"
ip -n "$A" addr add "$NET.1/24" dev veth-a
ip -n "$B" addr add "$NET.2/24" dev veth-b
for ns in "$A" "$B"; do
    ip -n "$ns" link set lo up
done
ip -n "$A" link set veth-a up
ip -n "$B" link set veth-b up
mkdir -p "$WORK/host-a" "$WORK/host-b" "$WORK/shared"

# What mpirun runs instead of ssh to start its daemon on host b: a shell in b's namespaces, with
# b's hostname and host a's directory hidden. mpirun calls it as `AGENT [options] HOST COMMAND...`.
cat >"$WORK/netns-rsh" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
[ "\$host" = "$NET.2" ] || { echo "netns-rsh: unknown host \$host" >&2; exit 1; }
exec ip netns exec $B unshare --uts --mount sh -c "hostname host-b; mount -t tmpfs none $WORK/host-a; \$*"
EOF
chmod +x "$WORK/netns-rsh"

# mpirun on host a (its hostname, host b's directory hidden), one rank on each host, TCP only.
job() { # LOG_DIR [digits options...]
    local log_dir=$1
    shift
    ip netns exec "$A" unshare --uts --mount bash -c '
        hostname host-a; mount -t tmpfs none "$0/host-b"; cd "$0/host-a"
        exec mpirun --allow-run-as-root --mca plm_rsh_agent "$0/netns-rsh" \
            --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$1.0/24" \
            --mca oob_tcp_if_include "$1.0/24" \
            -n 1 --host "$1.1" --wdir "$0/host-a" "$2" --mpi --log-dir "$3" "${@:4}" : \
            -n 1 --host "$1.2" --wdir "$0/host-b" "$2" --mpi --log-dir "$3" "${@:4}"
    ' "$WORK" "$NET" "$DIGITS" "$log_dir" --log-dir-policy refuse --epochs "$EPOCHS" "$@"
}

last_row() { python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))[-1], sort_keys=True))' "$1/stats.json"; }

echo "== an uninterrupted run of the two hosts ($EPOCHS epochs)"
job "$WORK/shared/whole" >"$WORK/whole.log" 2>&1 || { cat "$WORK/whole.log"; exit 1; }
tail -n 2 "$WORK/whole.log"

echo "== the same run, Ctrl-C on mpirun once the first checkpoint is written, then --resume"
job "$WORK/shared/resumed" >"$WORK/interrupted.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
    compgen -G "$WORK/shared/resumed/checkpoints/step-*" >/dev/null && break
    sleep 0.05
done
echo "host a runs: $(ip netns pids "$A" | xargs ps -o comm= -p | sort | uniq -c | xargs)"
echo "host b runs: $(ip netns pids "$B" | xargs ps -o comm= -p | sort | uniq -c | xargs)"
# To mpirun, as a terminal's Ctrl-C reaches it (its ranks have process groups of their own).
kill -INT "$(pgrep -f "^mpirun .*$WORK/netns-rsh")"
wait "$pid" || true
grep -E 'received|interrupted' "$WORK/interrupted.log" | head -n 3 || true
if ! grep -q 'interrupted' "$WORK/interrupted.log"; then
    cat "$WORK/interrupted.log"
    echo "two-hosts: the run was not interrupted (it ended before the signal?)"
    exit 1
fi
job "$WORK/shared/resumed" --resume >"$WORK/resumed.log" 2>&1 || { cat "$WORK/resumed.log"; exit 1; }
tail -n 2 "$WORK/resumed.log"

whole=$(last_row "$WORK/shared/whole")
resumed=$(last_row "$WORK/shared/resumed")
echo "uninterrupted: $whole"
echo "resumed:       $resumed"
[ "$whole" = "$resumed" ] || { echo "two-hosts: the resumed run ends elsewhere"; exit 1; }

echo "== the hosts' working directories"
for host in host-a host-b; do
    files=$(find "$WORK/$host" -mindepth 1 | wc -l)
    echo "$host: $files files"
    [ "$files" = 0 ] || { find "$WORK/$host"; echo "two-hosts: $host's directory holds run files"; exit 1; }
done
echo "two-hosts: ok"
