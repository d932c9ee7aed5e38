#!/usr/bin/env bash
# testbed/scale.sh: one gateway with many configured peers (BENCHMARKS.md "Scale"): vm1 lists vm2
# plus N-1 idle peers (MACs that never send). Measures the daemon's start-up time (exec to the
# status socket answering), its resident memory after start and after traffic, and the
# throughput to the one real peer, against the same topology with one peer, in one run (median
# of 3 iperf3 runs each, interleaved). Static keys by default; --session for per-session keys
# (the idle peers then have key rings; the host wakes only for their timers). Root.
#
# Usage: testbed/scale.sh [--peers N] [--secs S] [--session] [--no-build]
# Last line: RESULT peers=N start_ms_1=… start_ms_n=… rss_kib_1=… rss_kib_n=… tcp_mbps_1=… tcp_mbps_n=… n_vs_1=…
set -uo pipefail

PEERS=1000
SECS=5
SESSION=0
BUILD=1
while (($#)); do
    case $1 in
    --peers) PEERS=${2:?}; shift 2 ;;
    --secs) SECS=${2:?}; shift 2 ;;
    --session) SESSION=1; shift ;;
    --no-build) BUILD=0; shift ;;
    *) echo "scale: error: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[[ $(id -u) -eq 0 ]] || { echo "scale: error: run as root" >&2; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
die() { echo "scale: error: $*" >&2; exit 1; }

"$HERE/install-deps.sh" >/dev/null || die "installing dependencies failed"
if ((BUILD)); then
    (cd "$TB_ROOT" && cargo build --release --locked -p psp-gateway) || die "cargo build failed"
fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; peers $PEERS, session $SESSION"

tb_init || die "tb_init failed"
tb_trap
tb_up 2 raw && tb_keys aes128-gcm || die "topology"
export TB_SESSION=$SESSION
tb_config 1 aes128-gcm raw && tb_config 2 aes128-gcm raw || die "configs"
cp "$TB_DIR/vm1.toml" "$TB_DIR/vm1-one.toml"
{
    cat "$TB_DIR/vm1-one.toml"
    for ((i = 1; i < PEERS; i++)); do
        printf '\n[[peer]]\nname = "idle%d"\nmac = "02:50:54:%02x:%02x:%02x"\n' \
            "$i" $((i >> 16 & 255)) $((i >> 8 & 255)) $((i & 255))
        ((SESSION)) && printf 'address = "10.77.%d.%d"\n' $((i >> 8 & 255)) $((i & 255))
    done
} >"$TB_DIR/vm1-many.toml"
[[ $SESSION == 1 ]] && sed -i 's|^addresses = .*|addresses = ["10.77.0.1/16"]|' "$TB_DIR/vm1-many.toml"

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }

start_ms=() rss=()
run_with() { # one|many -> "start_ms rss_start_kib mbps rss_after_kib"
    local which=$1 t0 pid i mbps
    cp "$TB_DIR/vm1-$which.toml" "$TB_DIR/vm1.toml"
    t0=$(date +%s%N)
    tb_gw_start 1 >/dev/null || return 1
    local t1
    t1=$(date +%s%N)
    pid=$(cat "$TB_DIR/vm1.pid")
    local rss0
    rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
    tb_gw_start 2 >/dev/null || return 1
    tb_x vm1 ping -c 1 -W 3 "$(tb_ip 2)" >/dev/null
    tb_bg vm2 "$TB_DIR/iperf-s.log" iperf3 -s -1 -B "$(tb_ip 2)"
    sleep 0.3
    mbps=$(tb_x vm1 iperf3 -c "$(tb_ip 2)" -t "$SECS" -J | jq -r '.end.sum_received.bits_per_second / 1e6')
    local rss1
    rss1=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
    tb_gw_stop 1 >/dev/null
    tb_gw_stop 2 >/dev/null
    echo "$(((t1 - t0) / 1000000)) $rss0 $mbps $rss1"
}

for i in 1 2 3; do
    for which in one many; do
        r=$(run_with "$which") || die "run with $which failed"
        echo "  $which: start ${r%% *} ms, rss/start/mbps/rss-after: $r"
        echo "$r" >>"$TB_DIR/$which.txt"
    done
done
col() { awk -v c="$2" '{print $c}' "$TB_DIR/$1.txt" | median; }
S1=$(col one 1) SN=$(col many 1) R1=$(col one 4) RN=$(col many 4) T1=$(col one 3) TN=$(col many 3)
RATIO=$(awk -v a="$TN" -v b="$T1" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
echo "  medians: start $S1 vs $SN ms, RSS after traffic $R1 vs $RN KiB, TCP $T1 vs $TN Mbit/s (x$RATIO)"
echo "RESULT peers=$PEERS start_ms_1=$S1 start_ms_n=$SN rss_kib_1=$R1 rss_kib_n=$RN tcp_mbps_1=$T1 tcp_mbps_n=$TN n_vs_1=$RATIO"
