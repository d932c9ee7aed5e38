#!/usr/bin/env bash
# testbed/ab.sh: an A/B of psp-gateway binaries (BENCHMARKS.md "Gateway speed and timing": two
# builds of the daemon, before and after a change, in one run). Root; not in CI. One topology (vm1, vm2 on the lan bridge); for
# each round, each binary in turn runs both gateways for a ping, an iperf3 TCP x1 vm1 -> vm2,
# and two iperf3 UDP floods (-b 0) of 1372-byte and of 172-byte datagrams (received rate).
#
# Usage: sudo testbed/ab.sh UPLINK SUITE SECONDS ROUNDS BINARY...
#   UPLINK raw|udp; SUITE e.g. aes128-gcm; BINARY a psp-gateway executable (or a wrapper
#   script that execs one).
# Output: one line per run, `round R NAME tcp_mbps=… rtt_ms=… udp_mbps=… udp172_kpps=…`
# (udp172_kpps: thousands of 172-byte datagrams per second received, flooded; not the
# < 1 % loss rate compare.sh searches for).
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
        udp=$(tb_x vm1 iperf3 -c "$(tb_ip 2)" -u -b 0 -l 1372 -t "$SECS" -J 2>/dev/null |
            jq -r '.end.sum_received.bits_per_second / 1e6 | . * 10 | round / 10' 2>/dev/null || echo n/a)
        small=$(tb_x vm1 iperf3 -c "$(tb_ip 2)" -u -b 0 -l 172 -t "$SECS" -J 2>/dev/null |
            jq -r '.end.sum_received.bits_per_second / 1376 / 1e3 | . * 10 | round / 10' 2>/dev/null || echo n/a)
        echo "round $r $(basename "$b") tcp_mbps=$mbps rtt_ms=$rtt udp_mbps=$udp udp172_kpps=$small"
        tb_gw_stop 1 >/dev/null || true
        tb_gw_stop 2 >/dev/null || true
    done
done
