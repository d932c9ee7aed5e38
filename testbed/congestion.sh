#!/usr/bin/env bash
# testbed/congestion.sh: seed 003's congestion experiment (its §V-B, Fig 4, Table I, Fig 5) on
# the seven-node testbed, in network namespaces. Root; not in CI (the full run takes ~25 min).
#
# Usage:
#   sudo testbed/congestion.sh [--reps N] [--time S] [--quick] [--scenarios LIST] [--cc LIST]
#                              [--flows LIST] [--packing MODE] [--queue-bytes B] [--tcp CC]
#                              [--no-build] [--no-write] [--keep] [--results FILE]
#
#   --reps N         repetitions of every measurement (default 3; the report shows mean, min, max)
#   --time S         seconds per iperf3 transfer (default 20)
#   --quick          1 rep of 8 s (a smoke run; figures are indicative only)
#   --scenarios L    comma-separated, default none,uni,bi (seed 003's setups 0, 1, 2)
#   --cc L           comma-separated, default fixed,faithful,improved (`algorithm` of every peer;
#                    fixed = no congestion control, faithful = Algorithm 1, improved = ours)
#   --flows L        comma-separated parallel TCP flows per transfer, default 1,10
#   --packing MODE   faithful (default, as the paper: one inner packet per outer packet) | packed
#   --queue-bytes B  the gateways' inner queue (default: the gateway's default, 65536)
#   --tcp CC         the senders' TCP congestion control, set per socket with iperf3 -C
#                    (default cubic, as the paper's hosts; this machine's default is bbr)
#   --no-build       use the existing target/release binaries
#   --no-write       do not touch BENCHMARKS.md and docs/congestion.png
#   --keep           keep the run directory (configs, logs, iperf3 JSON, results.tsv)
#   --results FILE   also copy the raw results (TSV) to FILE
#
# Topology (seed 003 Fig 4; every box is a namespace named NAME-$TB_SFX):
#
#   hostA ---- gwA(vm1) ---- rA ==10 Mbit/s== rB ----+---- gwB(vm2) ---- hostB
#   10.9.0.1   br0: lan0+psp0  tbf both ways,        |     br0: lan0+psp0  10.9.0.2
#              up0 10.1.1.2    20-packet FIFO        +---- gwC(vm3)
#                                                          psp0 10.9.0.3 (no host behind it)
#
# The hosts' eth0 are bridged with their gateway's TAP (psp0), so the gateway sees the host's
# frames as a layer-2 hop, as the paper's VPN gateways do. Gateways use UDP uplinks (port 5198)
# routed through rA and rB; the routers forward plain IP. The rA->rB and rB->rA egresses carry
# `tbf rate 10mbit` with a 20-packet pfifo (the paper's 10 Mbit/s interface with a 20-packet
# drop-tail queue; this kernel has no netem, and none is needed: the paper adds no delay).
#
# Gateways (psp-gateway, aes128-gcm): every peer normalized with frame_size 1432 (a 1460-byte
# IP packet, the paper's outer size), S_min = S_step = 204 kbit/s, O_min = 40 ms, w = 1/8.
# Rates are kbit/s of whole frames on the wire (1474 bytes: Ethernet + IP + UDP + PSP frame),
# the unit tbf counts. Scenarios (S_goal per direction):
#   none   gwA <-> gwB only (gwC off), 8160 each way: no congestion (the paper's setup 0)
#   uni    A->B = A->C = 8160, B->A = C->A = 4080: the two flows leaving A share rA->rB
#   bi     all four 8160: rA->rB and rB->rA are both congested
# Per scenario and algorithm the gateways are (re)started, run WARMUP seconds so the
# controllers settle, then for every rep and flow count: iperf3 -t S -P FLOWS hostA -> hostB.
#
# Measured per transfer: goodput (iperf3 receiver sum), retransmissions % (hostA's
# TcpRetransSegs / TcpOutSegs from nstat), RTT (mean of the streams' smoothed RTT from iperf3),
# T_consumed (gwA's frames to gwB during the transfer x 1474 x 8 / time), the allowed goodput
# G_max = T_consumed x payload / 1474 (payload: TCP bytes per outer frame = TAP MTU - 52 with
# faithful packing), and the theoretical bound: min(S_goal A->B, 10 Mbit/s / flows sharing the
# link) x payload / 1474.
#
# Output: a results TSV, then `congestion_report` (benches) turns it into the Markdown tables
# (between the congestion markers in BENCHMARKS.md) and docs/congestion.png. The last line is
#   RESULT cc_1flow_of_bound=... cc_retr_pct=... cc_10flow_of_allowed=... nocc_1flow_kbps=...
#          nocc_retr_pct=... cc_algorithm=...
# (the uni scenario; fractions 0..1). Exit 0 when every transfer was measured, 1 otherwise,
# 2 on bad arguments.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

REPS=3
TIME=20
WARMUP=10
PAUSE=3
SCENARIOS=none,uni,bi
CCS=fixed,faithful,improved
FLOWS=1,10
PACKING=faithful
QUEUE_BYTES=""
TCP_CC=cubic
BUILD=1
WRITE=1
KEEP=0
RESULTS_COPY=""
SUITE=aes128-gcm
FRAME_SIZE=1432   # UDP payload: + 8 UDP + 20 IP = the paper's 1460-byte packets
WIRE=1474         # + 14 Ethernet: what tbf and S_goal count
LINK_KBIT=10000
ARGS_STR=""
[ $# -eq 0 ] || ARGS_STR=$(printf ' %q' "$@")

usage() { sed -n '/^# Usage:/,/^# Topology/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
bad_usage() {
    echo "congestion.sh: error: $*" >&2
    echo "run 'testbed/congestion.sh --help' for the options" >&2
    exit 2
}
say() { echo "== $*" >&2; }

while [ $# -gt 0 ]; do
    case $1 in
    --reps) REPS=${2:-}; shift 2 || bad_usage "--reps needs a value" ;;
    --time) TIME=${2:-}; shift 2 || bad_usage "--time needs a value" ;;
    --quick) REPS=1; TIME=8; WARMUP=6; PAUSE=2; shift ;;
    --scenarios) SCENARIOS=${2:-}; shift 2 || bad_usage "--scenarios needs a value" ;;
    --cc) CCS=${2:-}; shift 2 || bad_usage "--cc needs a value" ;;
    --flows) FLOWS=${2:-}; shift 2 || bad_usage "--flows needs a value" ;;
    --packing) PACKING=${2:-}; shift 2 || bad_usage "--packing needs a value" ;;
    --queue-bytes) QUEUE_BYTES=${2:-}; shift 2 || bad_usage "--queue-bytes needs a value" ;;
    --tcp) TCP_CC=${2:-}; shift 2 || bad_usage "--tcp needs a value" ;;
    --no-build) BUILD=0; shift ;;
    --no-write) WRITE=0; shift ;;
    --keep) KEEP=1; shift ;;
    --results) RESULTS_COPY=${2:-}; shift 2 || bad_usage "--results needs a value" ;;
    -h | --help) usage; exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
    esac
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || bad_usage "--reps must be a positive integer, got '$REPS'"
[[ $TIME =~ ^[1-9][0-9]*$ ]] || bad_usage "--time must be a positive integer, got '$TIME'"
for s in ${SCENARIOS//,/ }; do
    [[ $s == none || $s == uni || $s == bi ]] || bad_usage "unknown scenario '$s' (none, uni, bi)"
done
for c in ${CCS//,/ }; do
    [[ $c == fixed || $c == faithful || $c == improved ]] ||
        bad_usage "unknown --cc '$c' (fixed, faithful, improved)"
done
for f in ${FLOWS//,/ }; do
    [[ $f =~ ^[1-9][0-9]*$ ]] || bad_usage "--flows wants positive integers, got '$f'"
done
[[ $PACKING == faithful || $PACKING == packed ]] ||
    bad_usage "--packing must be faithful or packed, got '$PACKING'"
[[ -z $QUEUE_BYTES || $QUEUE_BYTES =~ ^[0-9]+$ ]] ||
    bad_usage "--queue-bytes must be a number, got '$QUEUE_BYTES'"
[ "$(id -u)" -eq 0 ] || bad_usage "run as root (network namespaces, TAPs)"

# --- tools ------------------------------------------------------------------------------------
for t in ip tc iperf3 nstat jq; do
    command -v "$t" >/dev/null || {
        say "installing test tools (testbed/install-deps.sh)"
        "$HERE/install-deps.sh" >&2
        break
    }
done
REPORT=$ROOT/target/release/congestion_report
if [ "$BUILD" -eq 1 ]; then
    say "building psp-gateway and congestion_report (release)"
    (cd "$ROOT" && cargo build --release --locked -p psp-gateway -p psp-benches \
        --bin psp-gateway --bin congestion_report >&2)
fi
[ -x "$TB_BIN" ] || bad_usage "no $TB_BIN (drop --no-build)"
[ -x "$REPORT" ] || bad_usage "no $REPORT (drop --no-build)"

# --- run directory and cleanup ----------------------------------------------------------------
RUN_DIR=$(mktemp -d /tmp/psp-congestion.XXXXXX)
chmod 700 "$RUN_DIR"
export TB_SFX="cg$$" TB_DIR="$RUN_DIR/tb"
mkdir -p "$TB_DIR"
RESULTS=$RUN_DIR/results.tsv
on_exit() {
    local rc=$?
    for n in 1 2 3; do tb_gw_stop "$n" >/dev/null 2>&1 || true; done
    tb_teardown || true
    if [ "$KEEP" -eq 1 ]; then
        echo "congestion.sh: run directory kept: $RUN_DIR" >&2
    else
        rm -rf "$RUN_DIR"
    fi
    return $rc
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- topology ---------------------------------------------------------------------------------
HOST_A_MAC=02:50:53:00:0a:01
HOST_B_MAC=02:50:53:00:0a:02

# veth NS1 IF1 NS2 IF2
veth() {
    ip -n "$(tb_ns "$1")" link add "$2" type veth peer name "$4" netns "$(tb_ns "$3")"
    ip -n "$(tb_ns "$1")" link set "$2" up
    ip -n "$(tb_ns "$3")" link set "$4" up
}

topology_up() {
    local n
    for n in hostA vm1 rA rB vm2 vm3 hostB; do tb__netns "$n"; done
    # host -- gateway: the host's eth0, the gateway's lan0 in bridge br0 (the TAP joins it once
    # the gateway has created it).
    veth hostA eth0 vm1 lan0
    veth hostB eth0 vm2 lan0
    ip -n "$(tb_ns hostA)" link set eth0 address "$HOST_A_MAC"
    ip -n "$(tb_ns hostB)" link set eth0 address "$HOST_B_MAC"
    ip -n "$(tb_ns hostA)" addr add 10.9.0.1/24 dev eth0
    ip -n "$(tb_ns hostB)" addr add 10.9.0.2/24 dev eth0
    tb_x hostA ip neigh replace 10.9.0.2 lladdr "$HOST_B_MAC" dev eth0 nud permanent
    tb_x hostB ip neigh replace 10.9.0.1 lladdr "$HOST_A_MAC" dev eth0 nud permanent
    for n in vm1 vm2; do
        ip -n "$(tb_ns "$n")" link add br0 type bridge stp_state 0 mcast_snooping 0
        ip -n "$(tb_ns "$n")" link set lan0 master br0
        ip -n "$(tb_ns "$n")" link set br0 up
    done
    # gateways -- routers -- routers
    veth vm1 up0 rA a0
    veth rA ab rB ba
    veth rB b1 vm2 up0
    veth rB c1 vm3 up0
    ip -n "$(tb_ns vm1)" addr add 10.1.1.2/24 dev up0
    ip -n "$(tb_ns rA)" addr add 10.1.1.1/24 dev a0
    ip -n "$(tb_ns rA)" addr add 10.1.0.1/30 dev ab
    ip -n "$(tb_ns rB)" addr add 10.1.0.2/30 dev ba
    ip -n "$(tb_ns rB)" addr add 10.1.3.1/24 dev b1
    ip -n "$(tb_ns rB)" addr add 10.1.4.1/24 dev c1
    ip -n "$(tb_ns vm2)" addr add 10.1.3.2/24 dev up0
    ip -n "$(tb_ns vm3)" addr add 10.1.4.2/24 dev up0
    ip -n "$(tb_ns vm1)" route add default via 10.1.1.1
    ip -n "$(tb_ns vm2)" route add default via 10.1.3.1
    ip -n "$(tb_ns vm3)" route add default via 10.1.4.1
    ip -n "$(tb_ns rA)" route add 10.1.3.0/24 via 10.1.0.2
    ip -n "$(tb_ns rA)" route add 10.1.4.0/24 via 10.1.0.2
    ip -n "$(tb_ns rB)" route add 10.1.1.0/24 via 10.1.0.1
    for n in rA rB; do tb_x "$n" sysctl -qw net.ipv4.ip_forward=1 >/dev/null; done
    # The bottleneck: 10 Mbit/s each way, 20-packet drop-tail FIFO. burst: two full frames.
    for n in rA:ab rB:ba; do
        tc -n "$(tb_ns "${n%:*}")" qdisc add dev "${n#*:}" root handle 1: tbf \
            rate "${LINK_KBIT}kbit" burst 2948 limit 29480
        tc -n "$(tb_ns "${n%:*}")" qdisc add dev "${n#*:}" parent 1:1 handle 10: pfifo limit 20
    done
    # ARP between the routed hops before any measurement.
    tb_x vm1 ping -c1 -W2 10.1.3.2 >/dev/null
    tb_x vm1 ping -c1 -W2 10.1.4.2 >/dev/null
}

# --- gateway configs --------------------------------------------------------------------------
tb_init
echo "1 2 3" >"$TB_DIR/hosts"
GW_NAME=([1]=gwA [2]=gwB [3]=gwC)
GW_UP=([1]=10.1.1.2 [2]=10.1.3.2 [3]=10.1.4.2)
GW_MAC=([1]=02:50:53:00:00:01 [2]=02:50:53:00:00:02 [3]=02:50:53:00:00:03)

# peer_block FROM TO S_GOAL CC
peer_block() {
    local a=$(($1 < $2 ? $1 : $2)) b=$(($1 < $2 ? $2 : $1)) macs
    case $2 in
    1) macs="\"${GW_MAC[1]}\", \"$HOST_A_MAC\"" ;;
    2) macs="\"${GW_MAC[2]}\", \"$HOST_B_MAC\"" ;;
    3) macs="\"${GW_MAC[3]}\"" ;;
    esac
    cat <<EOF

[[peer]]
name = "${GW_NAME[$2]}"
macs = [$macs]
endpoint = "${GW_UP[$2]}:$TB_PORT"
key_file = "vm$a-vm$b.key"

[peer.normalize]
s_goal_kbps = $3
algorithm = "$4"
EOF
}

# gw_config N SCENARIO CC
gw_config() {
    local n=$1 sc=$2 cc=$3 back=8160
    if [ "$sc" = uni ]; then back=4080; fi
    {
        echo "# ${GW_NAME[$n]} (vm$n), written by testbed/congestion.sh: scenario $sc, cc $cc"
        echo "[interface]"
        echo "name = \"psp0\""
        echo "mac = \"${GW_MAC[$n]}\""
        if [ "$n" = 3 ]; then echo "addresses = [\"10.9.0.3/24\"]"; fi
        echo
        echo "[uplink]"
        echo "kind = \"udp\""
        echo "listen = \"${GW_UP[$n]}:$TB_PORT\""
        echo
        echo "[daemon]"
        echo "status_socket = \"$(tb_sock "$n")\""
        echo
        echo "[defaults]"
        echo "suite = \"$SUITE\""
        echo
        echo "[group]"
        echo "key_file = \"group.key\""
        echo
        echo "[normalize]"
        echo "enabled = true"
        echo "frame_size = $FRAME_SIZE"
        echo "s_min_kbps = 204"
        echo "s_step_kbps = 204"
        echo "o_min_ms = 40"
        echo "w = 0.125"
        echo "packing = \"$PACKING\""
        if [ -n "$QUEUE_BYTES" ]; then echo "queue_bytes = $QUEUE_BYTES"; fi
        case $n in
        1)
            peer_block 1 2 8160 "$cc"
            if [ "$sc" != none ]; then peer_block 1 3 8160 "$cc"; fi
            ;;
        2 | 3) peer_block "$n" 1 "$back" "$cc" ;;
        esac
    } >"$TB_DIR/vm$n.toml"
}

# Start the gateways of a scenario and bridge each TAP with its host.
gws_up() {
    local sc=$1 cc=$2 n mtu
    GWS="1 2"
    if [ "$sc" != none ]; then GWS="1 2 3"; fi
    for n in $GWS; do gw_config "$n" "$sc" "$cc"; done
    for n in $GWS; do tb_gw_start "$n"; done
    for n in 1 2; do
        ip -n "$(tb_ns "vm$n")" link set psp0 master br0
    done
    mtu=$(ip -n "$(tb_ns vm1)" -o link show psp0 | sed -n 's/.* mtu \([0-9]*\) .*/\1/p')
    for n in hostA hostB; do ip -n "$(tb_ns "$n")" link set eth0 mtu "$mtu"; done
    for n in vm1 vm2; do ip -n "$(tb_ns "$n")" link set lan0 mtu "$mtu"; done
    TAP_MTU=$mtu
}
gws_down() {
    local n
    for n in 1 2 3; do tb_gw_stop "$n" || say "warning: vm$n gateway did not exit cleanly"; done
}

# jq over a gateway's status JSON
st() { tb_status "$1" --json | jq -r "$2"; }
# nstat counter in hostA
tcp_counter() {
    tb_x hostA nstat -asz "$1" | awk -v k="$1" '$1 == k {print $2; found = 1} END {if (!found) print 0}'
}

# --- the runs ---------------------------------------------------------------------------------
{
    echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "# command: testbed/congestion.sh$ARGS_STR"
    echo "# commit: $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "# cpu: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo) ($(nproc) cores)"
    echo "# kernel: $(uname -r); hosts' TCP: $TCP_CC"
    echo "# reps: $REPS; duration_s: $TIME; warmup_s: $WARMUP"
    echo "# suite: $SUITE; packing: $PACKING; queue_bytes: ${QUEUE_BYTES:-65536 (default)}"
    echo "# link: tbf ${LINK_KBIT} kbit/s each way, 20-packet pfifo; outer packets 1460 B IP (1474 B on the wire)"
    echo "# normalize: S_min = S_step = 204 kbit/s, O_min = 40 ms, w = 1/8"
} >"$RESULTS.head"
printf 'scenario\tcc\tflows\trep\tgoodput_kbps\tretr_pct\trtt_ms\tconsumed_kbps\tallowed_kbps\tbound_kbps\n' \
    >"$RESULTS.rows"

say "topology: 7 namespaces, suffix $TB_SFX"
topology_up
tb_keys "$SUITE"

FAILED=0
TAP_MTU=0
PORT=5300
for sc in ${SCENARIOS//,/ }; do
    for cc in ${CCS//,/ }; do
        say "scenario $sc, cc $cc: starting the gateways, ${WARMUP}s warm-up"
        gws_up "$sc" "$cc"
        sleep "$WARMUP"
        payload=$((TAP_MTU - 52))
        share=$LINK_KBIT
        if [ "$sc" != none ]; then share=$((LINK_KBIT / 2)); fi
        bound=$(awk -v s="$share" -v g=8160 -v p="$payload" -v w="$WIRE" \
            'BEGIN {r = s < g ? s : g; printf "%.0f", r * p / w}')
        for rep in $(seq 1 "$REPS"); do
            for fl in ${FLOWS//,/ }; do
                out=$RUN_DIR/iperf3-$sc-$cc-$fl-$rep.json
                seg0=$(tcp_counter TcpOutSegs)
                ret0=$(tcp_counter TcpRetransSegs)
                f0=$(st 1 '.peers[] | select(.name == "gwB") | .normalize.frames_sent')
                c0=$(st 1 '[.peers[] | select(.name == "gwC") | .normalize.frames_sent] | add // 0')
                t0=$(date +%s.%N)
                # A fresh one-off server per transfer: after a collapsed transfer the old
                # server can still be busy with it ("the server is busy running a test").
                PORT=$((PORT + 1))
                tb_bg hostB "$RUN_DIR/iperf3-server.log" iperf3 -s -1 -p "$PORT"
                srv=$TB_LAST_PID
                for _ in $(seq 50); do
                    tb_x hostB ss -Hltn "sport = :$PORT" | grep -q . && break
                    sleep 0.1
                done
                if ! tb_x hostA iperf3 -c 10.9.0.2 -p "$PORT" -t "$TIME" -P "$fl" \
                    -C "$TCP_CC" --connect-timeout 10000 -J >"$out" 2>&1; then
                    say "scenario $sc, cc $cc, $fl flows, rep $rep: iperf3 failed"
                    FAILED=1
                fi
                t1=$(date +%s.%N)
                tb_kill "$srv" || true
                f1=$(st 1 '.peers[] | select(.name == "gwB") | .normalize.frames_sent')
                c1=$(st 1 '[.peers[] | select(.name == "gwC") | .normalize.frames_sent] | add // 0')
                ac=$(awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v w="$WIRE" \
                    'BEGIN {printf "%.0f", (c1 - c0) * w * 8 / (t1 - t0) / 1000}')
                seg1=$(tcp_counter TcpOutSegs)
                ret1=$(tcp_counter TcpRetransSegs)
                good=$(jq -r '(.end.sum_received.bits_per_second // null) | if . == null then "nan" else . / 1000 end' "$out" 2>/dev/null || echo nan)
                rtt=$(jq -r '[.end.streams[]?.sender.mean_rtt // empty] | if length == 0 then "nan" else (add / length / 1000) end' "$out" 2>/dev/null || echo nan)
                row=$(awk -v s0="$seg0" -v s1="$seg1" -v r0="$ret0" -v r1="$ret1" \
                    -v f0="$f0" -v f1="$f1" -v t0="$t0" -v t1="$t1" -v w="$WIRE" -v p="$payload" \
                    -v good="$good" -v rtt="$rtt" -v bound="$bound" 'BEGIN {
                        segs = s1 - s0; retr = (segs > 0) ? 100 * (r1 - r0) / segs : "nan"
                        cons = (f1 - f0) * w * 8 / (t1 - t0) / 1000
                        printf "%s\t%s\t%s\t%.1f\t%.0f\t%.0f", good, retr, rtt, cons, cons * p / w, bound
                    }')
                printf '%s\t%s\t%s\t%s\t%s\n' "$sc" "$cc" "$fl" "$rep" "$row" >>"$RESULTS.rows"
                say "  $fl flow(s), rep $rep: $(echo "$row" | awk -F'\t' '{printf "goodput %.0f kbit/s, retr %.2f %%, RTT %.1f ms, A->B %.0f kbit/s (allowed %s, bound %s)", $1, $2, $3, $4, $5, $6}'), A->C $ac kbit/s"
                printf '%s\t%s\t%s\t%s\t%s\n' "$sc" "$cc" "$fl" "$rep" "$ac" >>"$RUN_DIR/a-to-c.tsv"
                sleep "$PAUSE"
            done
        done
        for n in $GWS; do tb_status "$n" --json >"$RUN_DIR/status-$sc-$cc-vm$n.json" || true; done
        gws_down
    done
done

{
    cat "$RESULTS.head"
    echo "# payload_per_frame: $((TAP_MTU - 52)); wire_bytes_per_frame: $WIRE; tap_mtu: $TAP_MTU"
    cat "$RESULTS.rows"
} >"$RESULTS"
[ -z "$RESULTS_COPY" ] || cp "$RESULTS" "$RESULTS_COPY"

MD=$RUN_DIR/congestion.md
PNG=$RUN_DIR/congestion.png
"$REPORT" --results "$RESULTS" --markdown "$MD" --png "$PNG" >"$RUN_DIR/report.out"

write_benchmarks() {
    local md=$ROOT/BENCHMARKS.md tmp begin='<!-- congestion:begin -->' end='<!-- congestion:end -->'
    if ! grep -qxF "$begin" "$md" || ! grep -qxF "$end" "$md"; then
        printf '\n%s\n%s\n' "$begin" "$end" >>"$md"
    fi
    tmp=$(mktemp "$md.XXXXXX")
    awk -v begin="$begin" -v end="$end" -v table="$MD" '
        $0 == begin { print; print ""; while ((getline line < table) > 0) print line; skip = 1; next }
        $0 == end { print ""; skip = 0 }
        !skip { print }' "$md" >"$tmp"
    chmod --reference="$md" "$tmp" 2>/dev/null || true
    mv "$tmp" "$md"
    cp "$PNG" "$ROOT/docs/congestion.png"
}

echo
cat "$MD"
echo
if [ "$WRITE" -eq 1 ]; then
    write_benchmarks
    say "BENCHMARKS.md (between the congestion markers) and docs/congestion.png updated"
fi
grep -v '^RESULT ' "$RUN_DIR/report.out" || true
grep '^RESULT ' "$RUN_DIR/report.out" | tail -1
[ "$FAILED" -eq 0 ]
