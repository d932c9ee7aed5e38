#!/usr/bin/env bash
# testbed/failover.sh: two uplinks that survive the loss of one (issue 28, docs/SESSIONS.md
# "Two paths"). Two hosts, two paths (bridges br0 and br1, hubs), sessions with SMKEX required
# and pinned identities; eve captures both paths. Root.
#
#   1. `paths = "failover"`: vm1 pings vm2 every 10 ms and one TCP stream (iperf3) runs from
#      vm1 to vm2 while path 1 is cut CUTS times (vm1's port on br0 set down) for CUT_S seconds
#      and restored, GAP_S seconds apart.
#      failover_ms: per cut, the longest gap between ping replies that began in the cut; the
#      median of the cuts. failback_ms: per restore, the longest gap between replies in the
#      two seconds after it; the median. failback_lost: pings lost in the two seconds after
#      the restores (the goal: 0). tcp_survived: iperf3 completed and carried data in every
#      second. cleartext_frames: frames on either path that are not PSP (EtherType 0x1982).
#   2. `paths = "both"` against `paths = "failover"`, each path shaped to SHAPE_MBIT on vm1's
#      uplinks (tbf): TCP throughput vm1 -> vm2; both_vs_one = both / failover.
#
# Usage: testbed/failover.sh [--quick] [--no-build]
#   --quick: 2 cuts of 3 s and a 5 s throughput run each (a functional run, as CI's)
# Last line: RESULT cuts=N failover_ms=… failback_ms=… failback_lost=… pings_lost_pct=…
#   tcp_survived=0|1 cleartext_frames=… one_path_mbit=… both_mbit=… both_vs_one=… reorder_held=…
#   reorder_gaps=… reorder_late=… (vm2's reorder buffer in the `both` run: frames that waited for
#   one that came on the other path, numbers given up as lost, frames that came after that)
set -uo pipefail

QUICK=0
BUILD=1
while (($#)); do
    case $1 in
    --quick) QUICK=1; shift ;;
    --no-build) BUILD=0; shift ;;
    *) echo "failover: error: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[[ $(id -u) -eq 0 ]] || { echo "failover: error: run as root" >&2; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
die() { echo "failover: error: $*" >&2; exit 1; }

if ((QUICK)); then CUTS=2 CUT_S=3 GAP_S=3 TPUT_S=5; else CUTS=5 CUT_S=10 GAP_S=5 TPUT_S=15; fi
SHAPE_MBIT=200

"$HERE/install-deps.sh" >/dev/null || die "installing dependencies failed"
if ((BUILD)); then
    (cd "$HERE/.." && cargo build --release -q -p psp-gateway) || die "build failed"
fi
[[ -x $TB_BIN ]] || die "no psp-gateway at $TB_BIN"

tb_init || die "init"
tb_trap
tb_up 2 raw || die "topology"
tb_path2 || die "path 2"
tb_identities || die "identities"
tb_keys aes128-gcm || die "keys"
LAN=$(tb_ns lan)

# Starts both gateways with `paths = MODE`; waits for a session (a ping answered).
start() {
    local mode=$1 i
    export TB_SESSION=1 TB_PATHS=2 TB_IDENTITY=1 TB_SMKEX=require
    export TB_SESSION_EXTRA="paths = \"$mode\""
    for i in 1 2; do
        tb_config "$i" aes128-gcm raw || die "config"
        tb_gw_start "$i" || die "vm$i did not start"
    done
    for _ in $(seq 1 50); do
        tb_x vm1 ping -c 1 -W 1 "$(tb_ip 2)" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    die "no session with paths = $mode"
}

stop() {
    tb_gw_stop 1 >/dev/null 2>&1
    tb_gw_stop 2 >/dev/null 2>&1
}

# --- 1. failover under ping and TCP ----------------------------------------------------------
start failover
tb_tcpdump eve "$TB_DIR/eve0.log" -i up0 -w "$TB_DIR/eve0.pcap" || die "tcpdump"
CAPTURE0=$TB_LAST_PID
tb_tcpdump eve "$TB_DIR/eve1.log" -i up1 -w "$TB_DIR/eve1.pcap" || die "tcpdump"
CAPTURE1=$TB_LAST_PID
TOTAL=$((CUTS * (CUT_S + GAP_S) + GAP_S))
tb_bg vm2 "$TB_DIR/iperf3-server.log" iperf3 -s -1
sleep 0.5
tb_bg vm1 "$TB_DIR/iperf3.json" iperf3 -c "$(tb_ip 2)" -t "$TOTAL" -i 1 -J
IPERF=$TB_LAST_PID
tb_bg vm1 "$TB_DIR/ping.log" ping -D -O -i 0.01 -W 1 -w "$((TOTAL + 1))" "$(tb_ip 2)"
PING=$TB_LAST_PID
sleep "$GAP_S"
: >"$TB_DIR/cuts"
for c in $(seq 1 "$CUTS"); do
    echo "cut $(date +%s.%N)" >>"$TB_DIR/cuts"
    ip -n "$LAN" link set vm1 down
    sleep "$CUT_S"
    echo "restore $(date +%s.%N)" >>"$TB_DIR/cuts"
    ip -n "$LAN" link set vm1 up
    sleep "$GAP_S"
    tb_status 1 --json >"$TB_DIR/status-$c.json" 2>/dev/null
done
wait "$PING" 2>/dev/null
wait "$IPERF" 2>/dev/null
IPERF_RC=$?
tb_kill "$CAPTURE0" >/dev/null 2>&1
tb_kill "$CAPTURE1" >/dev/null 2>&1
stop

# Per cut: the longest gap between replies that began at the cut; per restore: the longest gap
# in the two seconds after it and the pings lost there; the medians over the cuts.
read -r FAILOVER FAILBACK FAILBACK_LOST LOST_PCT < <(python3 - "$TB_DIR/ping.log" "$TB_DIR/cuts" <<'PY'
import re, statistics, sys
replies = []
for line in open(sys.argv[1]):
    m = re.match(r"\[(\d+\.\d+)\].*bytes from.*icmp_seq=(\d+)", line)
    if m:
        replies.append((float(m.group(1)), int(m.group(2))))
events = [(l.split()[0], float(l.split()[1])) for l in open(sys.argv[2]) if l.strip()]
got = {s for _, s in replies}
sent = max(got) if got else 0
def gap(after, until):
    best = 0.0
    for (t0, _), (t1, _) in zip(replies, replies[1:]):
        if t1 > after and t0 < until and t1 - t0 > best:
            best = t1 - t0
    return best * 1000
fo = [gap(t, t + 5) for k, t in events if k == "cut"]
fb, lost = [], 0
for k, t in events:
    if k != "restore":
        continue
    fb.append(gap(t, t + 2))
    first = next((s for t1, s in replies if t1 > t), None)
    if first is not None:
        lost += sum(1 for q in range(first, min(first + 200, sent + 1)) if q not in got)
total = sum(1 for q in range(1, sent + 1) if q not in got)
print("%.0f %.0f %d %.2f" % (statistics.median(fo) if fo else -1, statistics.median(fb) if fb else -1,
                            lost, 100 * total / sent if sent else 100))
PY
)
SENT=$(awk '/bytes from/ { n++ } END { print n + 0 }' "$TB_DIR/ping.log")
# TCP: completed, and no one-second interval without data.
TCP=0
if [[ $IPERF_RC -eq 0 ]] && jq -e '.end.sum_received.bytes > 0 and ([.intervals[].sum.bytes] | min > 0)' \
    "$TB_DIR/iperf3.json" >/dev/null 2>&1; then
    TCP=1
fi
CLEAR=$(for f in "$TB_DIR"/eve0.pcap "$TB_DIR"/eve1.pcap; do
    tcpdump -r "$f" -nn 'not ether proto 0x1982' 2>/dev/null
done | wc -l)

# --- 2. both paths against one, each shaped --------------------------------------------------
shape() {
    local dev
    for dev in up0 up1; do
        tb_x vm1 tc qdisc replace dev "$dev" root tbf rate "${SHAPE_MBIT}mbit" burst 64kb latency 50ms ||
            die "tc on $dev"
    done
}
tput() {
    local mode=$1
    start "$mode"
    shape
    tb_bg vm2 "$TB_DIR/iperf3-$mode.log" iperf3 -s -1
    sleep 0.3
    tb_iperf3 1 "$(tb_ip 2)" "$TPUT_S"
    # vm2's reorder buffer (paths = "both"): frames that waited, numbers given up, late frames.
    tb_status 2 --json 2>/dev/null | jq -r '.peers[0] | "\(.reorder_held // 0) \(.reorder_gaps // 0) \(.reorder_late // 0)"' \
        >"$TB_DIR/reorder-$mode.txt"
    stop
}
ONE=$(tput failover) || ONE=0
BOTH=$(tput both) || BOTH=0
RATIO=$(awk -v a="$BOTH" -v b="$ONE" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
read -r HELD GAPS LATE <"$TB_DIR/reorder-both.txt" || true

echo "failover: $CUTS cuts of ${CUT_S}s; ping replies $SENT; iperf3 rc $IPERF_RC"
echo "RESULT cuts=$CUTS failover_ms=$FAILOVER failback_ms=$FAILBACK failback_lost=$FAILBACK_LOST pings_lost_pct=$LOST_PCT tcp_survived=$TCP cleartext_frames=$CLEAR one_path_mbit=$ONE both_mbit=$BOTH both_vs_one=$RATIO reorder_held=${HELD:-0} reorder_gaps=${GAPS:-0} reorder_late=${LATE:-0}"
