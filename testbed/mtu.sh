#!/usr/bin/env bash
# testbed/mtu.sh: what an identity costs the TAP MTU and a bulk TCP transfer (docs/GATEWAY.md,
# "MTU"; BENCHMARKS.md, "Group copies"). Root; not in CI (CI's
# root_full_size_broadcasts_cross_with_an_identity checks the MTUs and a full-size broadcast).
#
# Usage: sudo testbed/mtu.sh [UPLINK] [SECONDS] [ROUNDS]     (defaults: raw 10 3)
#   Builds target/release/psp-gateway unless TB_BIN names a binary. Two gateways with sessions
#   (aes128-gcm) on the lan bridge; each round runs three configurations in turn:
#   `none` (no identity), `copies` (an identity, [session] group_frames = "copies", the default),
#   `signed` (an identity, group_frames = "signed", the thesis' way).
# Output: per run `round R MODE mtu=… tcp_mbps=… rtt_ms=… bcast=K/5` (K: replies from vm2 to a
#   broadcast ping of the full TAP MTU), then `RATIOS copies/signed=… none/signed=…` (medians).
set -euo pipefail
UPLINK=${1:-raw} SECS=${2:-10} ROUNDS=${3:-3}
build=${TB_BIN:+no}
source "$(dirname "$0")/lib.sh"
if [[ -z $build ]]; then
    (cd "$TB_ROOT" && cargo build --release --locked -q -p psp-gateway)
fi
export TB_SESSION=1 TB_SMKEX=off TB_IDENTITY=0
tb_pair "$UPLINK" aes128-gcm
tb_identities
tb_x vm2 sysctl -qw net.ipv4.icmp_echo_ignore_broadcasts=0
tb_bg vm2 "$TB_DIR/iperf3-server.log" iperf3 -s
declare -A runs
for r in $(seq "$ROUNDS"); do
    for mode in none copies signed; do
        case $mode in
            none) TB_IDENTITY=0 TB_SESSION_EXTRA= ;;
            copies) TB_IDENTITY=1 TB_SESSION_EXTRA='group_frames = "copies"' ;;
            signed) TB_IDENTITY=1 TB_SESSION_EXTRA='group_frames = "signed"' ;;
        esac
        export TB_IDENTITY TB_SESSION_EXTRA
        tb_config 1 aes128-gcm "$UPLINK"
        tb_config 2 aes128-gcm "$UPLINK"
        tb_gw_start 1 >/dev/null
        tb_gw_start 2 >/dev/null
        tb_x vm1 ping -c 3 -i 0.2 -W 1 "$(tb_ip 2)" >/dev/null || true
        mtu=$(tb_status 1 --json | jq -r .mtu)
        size=$((mtu - 28))
        bcast=$(tb_x vm1 ping -n -b -c 5 -i 0.2 -W 1 -s "$size" 10.77.0.255 2>/dev/null |
            grep -c "^$((size + 8)) bytes from $(tb_ip 2):" || true)
        rtt=$(tb_x vm1 ping -c 20 -i 0.05 "$(tb_ip 2)" | awk -F/ '/rtt/{print $5}')
        mbps=$(tb_iperf3 1 "$(tb_ip 2)" "$SECS")
        echo "round $r $mode mtu=$mtu tcp_mbps=$mbps rtt_ms=$rtt bcast=$bcast/5"
        runs[$mode]+="$mbps "
        tb_gw_stop 1 >/dev/null || true
        tb_gw_stop 2 >/dev/null || true
    done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
c=$(median "${runs[copies]}") s=$(median "${runs[signed]}") n=$(median "${runs[none]}")
echo "RATIOS copies/signed=$(awk -v a="$c" -v b="$s" 'BEGIN{printf "%.3f", a/b}') none/signed=$(awk -v a="$n" -v b="$s" 'BEGIN{printf "%.3f", a/b}') (median tcp_mbps: none $n, copies $c, signed $s)"
