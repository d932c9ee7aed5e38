#!/usr/bin/env bash
# testbed/sessions.sh: what sessions cost, measured on the real daemon (release build) in network
# namespaces: the wall-clock handshake time of single-path SEP vs two-path SMKEX, each with X25519
# only and with ML-KEM-768 beside it (`[session] kem = "require"`; median over N fresh set-ups
# per kind, each a new pair of daemons, the four kinds interleaved), and the throughput of iperf3 TCP with static keys,
# with sessions, and with a rekey every 2 s (median of 3 runs each, interleaved). Run as root. Not in CI (its quick variant is the
# sessions tests); figures go to BENCHMARKS.md.
#
# Usage: testbed/sessions.sh [--runs N] [--secs S] [--handshakes-only] [--no-build]
#   --handshakes-only  skip the iperf3 runs (their RESULT fields are then absent)
# Last line: RESULT handshake_ms_one_path=… handshake_ms_two_path=… handshake_ms_one_path_kem=…
#   handshake_ms_two_path_kem=… kem_vs_x25519_two_path=… tcp_mbps_static=… tcp_mbps_norekey=…
#   tcp_mbps_rekey2s=… rekey2s_vs_none=… session_vs_static=…
set -uo pipefail

RUNS=20
SECS=10
BUILD=1
HS_ONLY=0
while (($#)); do
    case $1 in
    --runs) RUNS=${2:?}; shift 2 ;;
    --secs) SECS=${2:?}; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --handshakes-only) HS_ONLY=1; shift ;;
    *) echo "sessions: error: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[[ $(id -u) -eq 0 ]] || { echo "sessions: error: run as root" >&2; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
die() { echo "sessions: error: $*" >&2; exit 1; }

"$HERE/install-deps.sh" >/dev/null || die "installing dependencies failed"
if ((BUILD)); then
    (cd "$TB_ROOT" && cargo build --release --locked -p psp-gateway) || die "cargo build failed"
fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"

tb_init || die "tb_init failed"
tb_trap
tb_up 2 raw && tb_path2 && tb_keys aes128-gcm && tb_identities || die "topology"
export TB_SESSION=1 TB_IDENTITY=1

median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2); else print "nan"}'; }

# One set-up: fresh daemons, the first ping starts the session; the slower side's handshake.
setup_ms() {
    tb_gw_start 1 >/dev/null && tb_gw_start 2 >/dev/null || return 1
    tb_x vm1 ping -c 1 -W 3 "$(tb_ip 2)" >/dev/null || { tb_gw_stop 1; tb_gw_stop 2; return 1; }
    for n in 1 2; do tb_status "$n" --json | jq -r '.peers[0].session.handshake_ms // empty'; done | sort -g | tail -1
    tb_gw_stop 1 >/dev/null
    tb_gw_stop 2 >/dev/null
}

# The four kinds of set-up, as "paths smkex kem".
KINDS=("1 off off" "2 require off" "1 off require" "2 require require")
kind_file() { echo "$TB_DIR/hs-${1// /-}.txt"; }

echo "== handshake wall time (ARP first, then SEP; $RUNS set-ups per kind, interleaved)"
for ((i = 0; i < RUNS; i++)); do
    for k in "${KINDS[@]}"; do
        read -r paths smkex kem <<<"$k"
        export TB_PATHS=$paths TB_SMKEX=$smkex TB_SESSION_EXTRA="kem = \"$kem\""
        tb_config 1 aes128-gcm raw && tb_config 2 aes128-gcm raw || die "config"
        setup_ms >>"$(kind_file "$k")"
    done
done
for k in "${KINDS[@]}"; do
    echo "  paths $k (paths smkex kem): $(wc -l <"$(kind_file "$k")") set-ups, ms: $(sort -g "$(kind_file "$k")" | tr '\n' ' ')"
done
HS1=$(median <"$(kind_file "1 off off")")
HS2=$(median <"$(kind_file "2 require off")")
HS1K=$(median <"$(kind_file "1 off require")")
HS2K=$(median <"$(kind_file "2 require require")")
KEMX=$(awk -v a="$HS2K" -v b="$HS2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
echo "  median: single-path SEP $HS1 ms (with ML-KEM-768 $HS1K), two-path SMKEX $HS2 ms (with ML-KEM-768 $HS2K, x$KEMX)"
HS_RESULT="handshake_ms_one_path=$HS1 handshake_ms_two_path=$HS2 handshake_ms_one_path_kem=$HS1K handshake_ms_two_path_kem=$HS2K kem_vs_x25519_two_path=$KEMX"
if ((HS_ONLY)); then
    echo "RESULT $HS_RESULT"
    exit 0
fi

iperf_once() { # rekey_after_s|static -> one Mbit/s figure (fresh daemons)
    if [[ $1 == static ]]; then
        export TB_SESSION=0 TB_PATHS=1
    else
        export TB_SESSION=1 TB_PATHS=2 TB_SMKEX=require TB_SESSION_EXTRA="rekey_after_s = $1"
    fi
    tb_config 1 aes128-gcm raw && tb_config 2 aes128-gcm raw || return 1
    tb_gw_start 1 >/dev/null && tb_gw_start 2 >/dev/null || return 1
    tb_x vm1 ping -c 1 -W 3 "$(tb_ip 2)" >/dev/null
    tb_bg vm2 "$TB_DIR/iperf-s.log" iperf3 -s -1 -B "$(tb_ip 2)"
    sleep 0.3
    tb_x vm1 iperf3 -c "$(tb_ip 2)" -t "$SECS" -J | jq -r '.end.sum_received.bits_per_second / 1e6'
    local rekeys drops
    rekeys=$(tb_status 1 --json | jq -r '.peers[0].session.rekeys // 0')
    drops=$(tb_status 2 --json | jq -r '.peers[0].drops | (."bad-icv" + .replay + ."too-old")')
    echo "    rekey_after_s=$1: rekeys $rekeys, bad-icv+replay+too-old $drops" >&2
    tb_gw_stop 1 >/dev/null
    tb_gw_stop 2 >/dev/null
}

echo "== iperf3 TCP vm1 -> vm2, ${SECS} s, two-path sessions, 3 pairs of runs interleaved"
for i in 1 2 3; do
    iperf_once static >>"$TB_DIR/iperf-static.txt"
    iperf_once 86400 >>"$TB_DIR/iperf-none.txt"
    iperf_once 2 >>"$TB_DIR/iperf-rekey.txt"
done
echo "  static keys:     $(tr '\n' ' ' <"$TB_DIR/iperf-static.txt") Mbit/s"
STATIC=$(median <"$TB_DIR/iperf-static.txt")
echo "  no rekey:        $(tr '\n' ' ' <"$TB_DIR/iperf-none.txt") Mbit/s"
echo "  rekey every 2 s: $(tr '\n' ' ' <"$TB_DIR/iperf-rekey.txt") Mbit/s"
NONE=$(median <"$TB_DIR/iperf-none.txt")
REKEY=$(median <"$TB_DIR/iperf-rekey.txt")
RATIO=$(awk -v a="$REKEY" -v b="$NONE" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
echo "  median: no rekey $NONE Mbit/s, rekey every 2 s $REKEY Mbit/s (x$RATIO)"
SVS=$(awk -v a="$NONE" -v b="$STATIC" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
echo "  sessions (no rekey) vs static keys: x$SVS"
echo "RESULT $HS_RESULT tcp_mbps_static=$STATIC tcp_mbps_norekey=$NONE tcp_mbps_rekey2s=$REKEY rekey2s_vs_none=$RATIO session_vs_static=$SVS"
