#!/usr/bin/env bash
# testbed/ab.sh: an A/B of psp-gateway binaries (BENCHMARKS.md "Gateway speed and timing": two
# builds of the daemon, before and after a change, in one run). Root; not in CI. One topology (vm1, vm2 on the lan bridge); for
# each round, each binary in turn runs both gateways for a ping and an iperf3 TCP x1 vm1 -> vm2.
#
# Usage: sudo testbed/ab.sh UPLINK SUITE SECONDS ROUNDS BINARY...
#   UPLINK raw|udp; SUITE e.g. aes128-gcm; BINARY a psp-gateway executable (or a wrapper
#   script that execs one).
# Output: one line per run, `round R NAME tcp_mbps=… rtt_ms=…`.
set -euo pipefail
(($# >= 5)) || { sed -n '2,10p' "$0"; exit 2; }
source "$(dirname "$0")/lib.sh"
UPLINK=$1 SUITE=$2 SECS=$3 ROUNDS=$4
shift 4
tb_pair "$UPLINK" "$SUITE"
tb_bg vm2 "$TB_DIR/iperf3-server.log" iperf3 -s
for r in $(seq "$ROUNDS"); do
    for b in "$@"; do
        TB_BIN=$b tb_gw_start 1 >/dev/null
        TB_BIN=$b tb_gw_start 2 >/dev/null
        tb_x vm1 ping -c 3 -i 0.2 -W 1 "$(tb_ip 2)" >/dev/null || true
        rtt=$(tb_x vm1 ping -c 20 -i 0.05 "$(tb_ip 2)" | awk -F/ '/rtt/{print $5}')
        mbps=$(tb_iperf3 1 "$(tb_ip 2)" "$SECS")
        echo "round $r $(basename "$b") tcp_mbps=$mbps rtt_ms=$rtt"
        tb_gw_stop 1 >/dev/null || true
        tb_gw_stop 2 >/dev/null || true
    done
done
