#!/usr/bin/env bash
# testbed/latency.sh: the ping RTT psp-gateway adds (BENCHMARKS.md "Gateway speed and timing").
# Root; not in CI. 200 pings 5 ms apart over plain veth (uplink addresses), then through the
# tunnel.
#
# Usage: sudo testbed/latency.sh UPLINK SUITE [BINARY]   (default target/release/psp-gateway)
# Output: `plain_rtt_ms=… tunnel_rtt_ms=… added_ms=…`
set -euo pipefail
(($# >= 2)) || { sed -n '2,8p' "$0"; exit 2; }
source "$(dirname "$0")/lib.sh"
UPLINK=$1 SUITE=$2
TB_BIN=${3:-$TB_BIN}
tb_pair "$UPLINK" "$SUITE"
[[ $UPLINK == udp ]] || tb_uplink_addrs
plain=$(tb_x vm1 ping -c 200 -i 0.005 -q "$(tb_up_ip 2)" | awk -F/ '/rtt/{print $5}')
tb_gw_start 1 >/dev/null
tb_gw_start 2 >/dev/null
tb_x vm1 ping -c 3 -i 0.2 -W 1 "$(tb_ip 2)" >/dev/null || true
tun=$(tb_x vm1 ping -c 200 -i 0.005 -q "$(tb_ip 2)" | awk -F/ '/rtt/{print $5}')
echo "plain_rtt_ms=$plain tunnel_rtt_ms=$tun added_ms=$(awk -v a="$tun" -v b="$plain" 'BEGIN{printf "%.3f", a-b}')"
