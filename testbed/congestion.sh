#!/usr/bin/env bash
# testbed/congestion.sh: seed 003's congestion experiment (its §V-B, Fig 4, Table I, Fig 5) on
# the seven-node testbed, in network namespaces. Root; not in CI (the full run takes ~45 min).
#
# Usage:
#   sudo testbed/congestion.sh [--reps N] [--time S] [--quick] [--scenarios LIST] [--cc LIST]
#                              [--flows LIST] [--packing MODE] [--queue-bytes B] [--aqm LIST]
#                              [--tcp CC] [--ecn on|off] [--keys session|static] [--no-build]
#                              [--no-write] [--keep] [--results FILE]
#
#   --reps N         repetitions of every measurement (default 3; the report shows mean, min, max)
#   --time S         seconds per iperf3 transfer (default 20)
#   --quick          1 rep of 8 s (a smoke run; figures are indicative only)
#   --scenarios L    comma-separated, default none,uni,bi (seed 003's setups 0, 1, 2)
#   --cc L           comma-separated, default fixed,faithful,improved (`algorithm` of every peer;
#                    fixed = no congestion control, faithful = Algorithm 1, improved = ours)
#   --flows L        comma-separated parallel TCP flows per transfer, default 1,10
#   --packing MODE   faithful (default, as the paper: one inner packet per outer packet) | packed
#   --queue-bytes B  the gateways' inner queue (default: the gateway's default, 262144 with
#                    CoDel, 65536 with drop-tail)
#   --aqm L          comma-separated, default codel,drop-tail: the gateways' inner-queue AQM
#                    (`aqm` in [normalize]; codel-noecn is CoDel with `codel_ecn = false`,
#                    dropping where codel marks). The first runs every scenario and CC (the tables);
#                    each other one runs once more for the uni scenario and the RESULT CC
#                    (improved if in --cc, else faithful, else the first), right after the
#                    first one's run of it, for the before/after comparison
#   --tcp CC         the senders' TCP congestion control, set per socket with iperf3 -C
#                    (default cubic, as the paper's hosts; this machine's default is bbr)
#   --ecn on|off     the hosts' net.ipv4.tcp_ecn: on = 1 (request ECN; default), off = 0. Only
#                    CoDel marks (codel_ecn); drop-tail and the routers' FIFO only drop
#   --keys K         session (default): the peers' keys come from SEP sessions (one path,
#                    smkex off) that the gateways start by themselves, whose rekeys ride
#                    inside the normalized streams; the run fails unless every session of
#                    gateway A is up; static: a key_file per pair (the setup of the figures before)
#   --no-build       use the existing target/release binaries
#   --no-write       do not touch BENCHMARKS.md and docs/congestion.png
#   --keep           keep the run directory (configs, logs, iperf3 JSON, results.tsv)
#   --results FILE   also copy the raw results (TSV) to FILE
#
# Topology (seed 003 Fig 4; every box is a namespace named NAME-$TB_SFX):
#
#   hostA ---- gwA(vm1) ---- rA ==10 Mbit/s== rB ----+---- gwB(vm2) ---- hostB
#   10.8.1.1   lan0 10.8.1.2   tbf both ways,        |     psp0 10.9.0.2   10.8.2.1
#              psp0 10.9.0.1   20-packet FIFO        |     lan0 10.8.2.2
#              up0 10.1.1.2                          +---- gwC(vm3)
#                                                          psp0 10.9.0.3 (no host behind it)
#
# Each host is routed through its gateway's namespace into the TAP (psp0): the gateway seals only
# frames whose source MAC is its own (since 00fefd3, `spoofed_src`), so the hosts can no longer
# be bridged with the TAP as a layer-2 hop (the paper's VPN gateways); routing puts one IP hop
# in each gateway namespace instead. Gateways use UDP uplinks (port 5198) routed through rA and rB; the routers forward plain IP. The rA->rB and rB->rA egresses carry
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
# base RTT (ping hostA -> hostB through the tunnel after the warm-up, before any transfer: the
# same path unloaded), T_consumed (gwA's frames to gwB during the transfer x 1474 x 8 / time),
# the allowed goodput G_max = T_consumed x payload / 1474 (payload: TCP bytes per outer frame = TAP MTU - 52 with
# faithful packing), and the theoretical bound: min(S_goal A->B, 10 Mbit/s / flows sharing the
# link) x payload / 1474.
#
# Output: a results TSV, then `congestion_report` (benches) turns it into the Markdown tables
# (between the congestion markers in BENCHMARKS.md) and docs/congestion.png, plus the AQM
# comparison table (uni scenario, RESULT CC, every --aqm). The last lines are
#   RESULT_DROPTAIL aqm=drop-tail base_rtt_ms=... cc_1flow_rtt_ms=... cc_10flow_retr_pct=... ...
#   RESULT cc_1flow_of_bound=... cc_retr_pct=... cc_10flow_of_allowed=... nocc_1flow_kbps=...
#          nocc_retr_pct=... cc_algorithm=... aqm=codel base_rtt_ms=... cc_1flow_rtt_ms=...
#          cc_10flow_retr_pct=... [goodput_1flow_ratio=... goodput_10flow_ratio=...]
# (the uni scenario; fractions 0..1; the *_ratio keys: this AQM's goodput over the second
# --aqm's, same run). The load average (1 min) is printed at the start of every group and in
# the AQM lines. Exit 0 when every transfer was measured, 1 otherwise, 2 on bad arguments.
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
AQMS=codel,drop-tail
TCP_CC=cubic
ECN=on
BUILD=1
WRITE=1
KEEP=0
RESULTS_COPY=""
SUITE=aes128-gcm
KEYS=session
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
    --aqm) AQMS=${2:-}; shift 2 || bad_usage "--aqm needs a value" ;;
    --tcp) TCP_CC=${2:-}; shift 2 || bad_usage "--tcp needs a value" ;;
    --ecn) ECN=${2:-}; shift 2 || bad_usage "--ecn needs a value" ;;
    --keys) KEYS=${2:-}; shift 2 || bad_usage "--keys needs a value" ;;
    --no-build) BUILD=0; shift ;;
    --no-write) WRITE=0; shift ;;
    --keep) KEEP=1; shift ;;
    --results) RESULTS_COPY=${2:-}; shift 2 || bad_usage "--results needs a value" ;;
    -h | --help) usage; exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
    esac
done
[[ $KEYS == session || $KEYS == static ]] || bad_usage "--keys must be session or static, got '$KEYS'"
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
for a in ${AQMS//,/ }; do
    [[ $a == codel || $a == codel-noecn || $a == drop-tail ]] ||
        bad_usage "unknown --aqm '$a' (codel, codel-noecn, drop-tail)"
done
[ -n "${AQMS//,/}" ] || bad_usage "--aqm needs at least one of codel, codel-noecn, drop-tail"
[[ $ECN == on || $ECN == off ]] || bad_usage "--ecn must be on or off, got '$ECN'"
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
HOST_B_IP=10.8.2.1

# veth NS1 IF1 NS2 IF2
veth() {
    ip -n "$(tb_ns "$1")" link add "$2" type veth peer name "$4" netns "$(tb_ns "$3")"
    ip -n "$(tb_ns "$1")" link set "$2" up
    ip -n "$(tb_ns "$3")" link set "$4" up
}

topology_up() {
    local n
    for n in hostA vm1 rA rB vm2 vm3 hostB; do tb__netns "$n"; done
    # host -- gateway: the host's eth0, the gateway's lan0; the gateway namespace routes between
    # lan0 and the TAP (gws_up adds the routes once the gateway has created the TAP).
    veth hostA eth0 vm1 lan0
    veth hostB eth0 vm2 lan0
    ip -n "$(tb_ns hostA)" addr add 10.8.1.1/24 dev eth0
    ip -n "$(tb_ns vm1)" addr add 10.8.1.2/24 dev lan0
    ip -n "$(tb_ns hostB)" addr add "$HOST_B_IP/24" dev eth0
    ip -n "$(tb_ns vm2)" addr add 10.8.2.2/24 dev lan0
    ip -n "$(tb_ns hostA)" route add default via 10.8.1.2
    ip -n "$(tb_ns hostB)" route add default via 10.8.2.2
    for n in vm1 vm2; do tb_x "$n" sysctl -qw net.ipv4.ip_forward=1 >/dev/null; done
    for n in hostA hostB; do
        tb_x "$n" sysctl -qw net.ipv4.tcp_ecn="$([ "$ECN" = on ] && echo 1 || echo 0)" >/dev/null
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
    1) macs="\"${GW_MAC[1]}\"" ;;
    2) macs="\"${GW_MAC[2]}\"" ;;
    3) macs="\"${GW_MAC[3]}\"" ;;
    esac
    cat <<EOF

[[peer]]
name = "${GW_NAME[$2]}"
macs = [$macs]
endpoint = "${GW_UP[$2]}:$TB_PORT"
$(if [ "$KEYS" = session ]; then echo "address = \"10.9.0.$2\""; else echo "key_file = \"vm$a-vm$b.key\""; fi)

[peer.normalize]
s_goal_kbps = $3
algorithm = "$4"
EOF
}

# gw_config N SCENARIO CC AQM
gw_config() {
    local n=$1 sc=$2 cc=$3 aqm=$4 back=8160
    if [ "$sc" = uni ]; then back=4080; fi
    {
        echo "# ${GW_NAME[$n]} (vm$n), written by testbed/congestion.sh: scenario $sc, cc $cc, aqm $aqm"
        echo "[interface]"
        echo "name = \"psp0\""
        echo "mac = \"${GW_MAC[$n]}\""
        echo "addresses = [\"10.9.0.$n/24\"]"
        echo
        echo "[uplink]"
        echo "kind = \"udp\""
        echo "listen = \"${GW_UP[$n]}:$TB_PORT\""
        echo
        if [ "$KEYS" = session ]; then
            echo "[session]"
            echo "smkex = \"off\""
            echo
        fi
        echo "[daemon]"
        echo "status_socket = \"$(tb_sock "$n")\""
        echo "state_directory = \"$TB_DIR/gw$n.state\""
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
        case $aqm in
        codel-noecn) echo "aqm = \"codel\""; echo "codel_ecn = false" ;;
        *) echo "aqm = \"$aqm\"" ;;
        esac
        case $n in
        1)
            peer_block 1 2 8160 "$cc"
            if [ "$sc" != none ]; then peer_block 1 3 8160 "$cc"; fi
            ;;
        2 | 3) peer_block "$n" 1 "$back" "$cc" ;;
        esac
    } >"$TB_DIR/vm$n.toml"
}

# Start the gateways of a scenario and route each host through its gateway's TAP.
gws_up() {
    local sc=$1 cc=$2 aqm=$3 n mtu
    GWS="1 2"
    if [ "$sc" != none ]; then GWS="1 2 3"; fi
    for n in $GWS; do gw_config "$n" "$sc" "$cc" "$aqm"; done
    for n in $GWS; do tb_gw_start "$n"; done
    tb_x vm1 ip route replace 10.8.2.0/24 via 10.9.0.2 dev psp0
    tb_x vm2 ip route replace 10.8.1.0/24 via 10.9.0.1 dev psp0
    tb_x vm1 ip neigh replace 10.9.0.2 lladdr "${GW_MAC[2]}" dev psp0 nud permanent
    tb_x vm2 ip neigh replace 10.9.0.1 lladdr "${GW_MAC[1]}" dev psp0 nud permanent
    mtu=$(ip -n "$(tb_ns vm1)" -o link show psp0 | sed -n 's/.* mtu \([0-9]*\) .*/\1/p')
    for n in hostA hostB; do ip -n "$(tb_ns "$n")" link set eth0 mtu "$mtu"; done
    for n in vm1 vm2; do ip -n "$(tb_ns "$n")" link set lan0 mtu "$mtu"; done
    TAP_MTU=$mtu
    if [ "$KEYS" = session ]; then
        # A normalized session peer starts its first handshake by itself (under the group
        # key); later ones ride in the streams. Every tunnel of gwA must run before anything is
        # measured: without A->C, A->B would have the bottleneck to itself.
        tb_x vm1 ping -c 3 -i 0.2 -W 2 10.9.0.2 >/dev/null || say "warning: no ping through the session"
        local peer state peers=gwB
        [ "$sc" = none ] || peers+=" gwC"
        for peer in $peers; do
            state=$(st 1 "[.peers[] | select(.name == \"$peer\") | .session.state] | first // \"none\"")
            if [ "$state" != up ]; then
                say "error: gwA's session with $peer is '$state'"
                FAILED=1
            fi
        done
    fi
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
# The first --aqm runs everything; the others only the uni scenario with the RESULT CC.
PRIMARY_AQM=${AQMS%%,*}
RESULT_CC=${CCS%%,*}
for c in faithful improved; do [[ ,$CCS, == *,$c,* ]] && RESULT_CC=$c; done
GROUPS_LIST=()
for sc in ${SCENARIOS//,/ }; do
    for cc in ${CCS//,/ }; do
        GROUPS_LIST+=("$sc $cc $PRIMARY_AQM")
        if [ "$sc" = uni ] && [ "$cc" = "$RESULT_CC" ]; then
            for a in ${AQMS//,/ }; do
                [ "$a" = "$PRIMARY_AQM" ] || GROUPS_LIST+=("$sc $cc $a")
            done
        fi
    done
done
load1() { cut -d' ' -f1 /proc/loadavg; }

{
    echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "# command: testbed/congestion.sh$ARGS_STR"
    echo "# commit: $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "# cpu: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo) ($(nproc) cores)"
    echo "# kernel: $(uname -r); hosts' TCP: $TCP_CC; hosts' ECN: $ECN"
    echo "# reps: $REPS; duration_s: $TIME; warmup_s: $WARMUP"
    echo "# suite: $SUITE; packing: $PACKING; queue_bytes: ${QUEUE_BYTES:-default (262144 codel, 65536 drop-tail)}; aqm: $PRIMARY_AQM"
    echo "# load average at start (1, 5, 15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# link: tbf ${LINK_KBIT} kbit/s each way, 20-packet pfifo; outer packets 1460 B IP (1474 B on the wire)"
    echo "# normalize: S_min = S_step = 204 kbit/s, O_min = 40 ms, w = 1/8"
} >"$RESULTS.head"
printf 'scenario\tcc\tflows\trep\tgoodput_kbps\tretr_pct\trtt_ms\tconsumed_kbps\tallowed_kbps\tbound_kbps\n' \
    >"$RESULTS.rows"
# Every transfer with its AQM, the group's base RTT and load (the AQM comparison).
AQM_ROWS=$RUN_DIR/aqm.tsv
printf 'scenario\tcc\taqm\tflows\trep\tgoodput_kbps\tretr_pct\trtt_ms\tbase_rtt_ms\tload1\n' >"$AQM_ROWS"
# Per group: AQM drops and marks and queue-full drops at gwA towards gwB over the whole group.
AQM_DROPS=$RUN_DIR/aqm-drops.tsv
printf 'scenario\tcc\taqm\taqm_drops\taqm_marks\tinner_drops\n' >"$AQM_DROPS"

say "topology: 7 namespaces, suffix $TB_SFX"
topology_up
tb_keys "$SUITE"

FAILED=0
TAP_MTU=0
PORT=5300
for group in "${GROUPS_LIST[@]}"; do
    read -r sc cc aqm <<<"$group"
    say "scenario $sc, cc $cc, aqm $aqm: starting the gateways, ${WARMUP}s warm-up (load $(load1))"
    gws_up "$sc" "$cc" "$aqm"
    sleep "$WARMUP"
    # The same path unloaded: ping through the tunnel before any transfer.
    base=$( (tb_x hostA ping -q -c 20 -i 0.05 -W 2 "$HOST_B_IP" 2>/dev/null || true) |
        awk -F'/' '/^(rtt|round-trip)/ {print $5}')
    base=${base:-nan}
    say "  base RTT $base ms"
    d0=$(st 1 '.peers[] | select(.name == "gwB") | [.normalize.aqm_drops // 0, .normalize.aqm_marks // 0, .normalize.inner_drops] | @tsv')
    payload=$((TAP_MTU - 52))
    share=$LINK_KBIT
    if [ "$sc" != none ]; then share=$((LINK_KBIT / 2)); fi
    bound=$(awk -v s="$share" -v g=8160 -v p="$payload" -v w="$WIRE" \
        'BEGIN {r = s < g ? s : g; printf "%.0f", r * p / w}')
    for rep in $(seq 1 "$REPS"); do
        for fl in ${FLOWS//,/ }; do
            out=$RUN_DIR/iperf3-$sc-$cc-$aqm-$fl-$rep.json
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
            # A collapsed transfer (no congestion control) can leave iperf3 waiting for its
            # results exchange for ever: it gets TIME + 60 s, then counts as failed (goodput 0).
            if ! timeout $((TIME + 60)) ip netns exec "$(tb_ns hostA)" iperf3 -c "$HOST_B_IP" \
                -p "$PORT" -t "$TIME" -P "$fl" -C "$TCP_CC" --connect-timeout 10000 -J >"$out" 2>&1; then
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
            if [ "$aqm" = "$PRIMARY_AQM" ]; then
                printf '%s\t%s\t%s\t%s\t%s\n' "$sc" "$cc" "$fl" "$rep" "$row" >>"$RESULTS.rows"
            fi
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$sc" "$cc" "$aqm" "$fl" "$rep" \
                "$(echo "$row" | cut -f1-3)" "$base" "$(load1)" >>"$AQM_ROWS"
            say "  $fl flow(s), rep $rep: $(echo "$row" | awk -F'\t' '{printf "goodput %.0f kbit/s, retr %.2f %%, RTT %.1f ms, A->B %.0f kbit/s (allowed %s, bound %s)", $1, $2, $3, $4, $5, $6}'), A->C $ac kbit/s"
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$sc" "$cc" "$aqm" "$fl" "$rep" "$ac" >>"$RUN_DIR/a-to-c.tsv"
            sleep "$PAUSE"
        done
    done
    d1=$(st 1 '.peers[] | select(.name == "gwB") | [.normalize.aqm_drops // 0, .normalize.aqm_marks // 0, .normalize.inner_drops] | @tsv')
    paste <(printf '%s\t%s\t%s\n' "$sc" "$cc" "$aqm") <(echo "$d0") <(echo "$d1") |
        awk -F'\t' -v OFS='\t' '{print $1, $2, $3, $7 - $4, $8 - $5, $9 - $6}' >>"$AQM_DROPS"
    for n in $GWS; do tb_status "$n" --json >"$RUN_DIR/status-$sc-$cc-$aqm-vm$n.json" || true; done
    gws_down
done

{
    cat "$RESULTS.head"
    echo "# payload_per_frame: $((TAP_MTU - 52)); wire_bytes_per_frame: $WIRE; tap_mtu: $TAP_MTU"
    cat "$RESULTS.rows"
} >"$RESULTS"
[ -z "$RESULTS_COPY" ] || cp "$RESULTS" "$RESULTS_COPY"

MD=$RUN_DIR/congestion.md
PNG=$RUN_DIR/congestion.png
"$REPORT" --results "$RESULTS" --markdown "$MD" --png "$PNG" --result-cc "$RESULT_CC" \
    >"$RUN_DIR/report.out"

# The AQM comparison: uni scenario, RESULT CC, one line per --aqm (means over repetitions).
aqm_summary() {
    awk -F'\t' -v OFS='\t' -v cc="$RESULT_CC" -v aqms="$AQMS" -v drops="$AQM_DROPS" '
        function mean(k) { return (n[k] > 0) ? sprintf("%.2f", sum[k] / n[k]) : "nan" }
        BEGIN {
            while ((getline line < drops) > 0) {
                split(line, d, "\t")
                if (d[1] == "uni" && d[2] == cc) { aqmd[d[3]] = d[4]; aqmm[d[3]] = d[5]; qd[d[3]] = d[6] }
            }
        }
        NR > 1 && $1 == "uni" && $2 == cc {
            a = $3
            if ($4 == 1) { add(a "rtt1", $8); add(a "good1", $6) }
            if ($4 == 10) { add(a "retr10", $7); add(a "good10", $6); add(a "rtt10", $8) }
            add(a "base", $9)
            if ($10 + 0 > load[a] + 0) load[a] = $10
        }
        function add(k, v) { if (v != "nan" && v != "") { sum[k] += v; n[k]++ } }
        END {
            na = split(aqms, list, ",")
            for (i = 1; i <= na; i++) {
                a = list[i]
                printf "aqm=%s base_rtt_ms=%s cc_1flow_rtt_ms=%s cc_10flow_retr_pct=%s", a,
                    mean(a "base"), mean(a "rtt1"), mean(a "retr10")
                printf " cc_1flow_kbps=%s cc_10flow_kbps=%s cc_10flow_rtt_ms=%s", mean(a "good1"),
                    mean(a "good10"), mean(a "rtt10")
                printf " aqm_drops=%s aqm_marks=%s queue_drops=%s load1_max=%s\n",
                    (a in aqmd) ? aqmd[a] : "nan", (a in aqmm) ? aqmm[a] : "nan",
                    (a in qd) ? qd[a] : "nan", (a in load) ? load[a] : "nan"
            }
        }' "$AQM_ROWS"
}
# key=value from a summary line
kv() { echo "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k {print $2}'; }
aqm_summary >"$RUN_DIR/aqm-summary.txt"
PRIMARY_LINE=$(head -1 "$RUN_DIR/aqm-summary.txt")
OTHER_LINE=$(sed -n 2p "$RUN_DIR/aqm-summary.txt")
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "nan" || b == "nan" || b + 0 == 0) print "nan"; else printf "%.3f", a / b }'
}
RESULT_EXTRA=" $(echo "$PRIMARY_LINE" | cut -d' ' -f1-4)"
if [ -n "$OTHER_LINE" ]; then
    RESULT_EXTRA+=" goodput_1flow_ratio=$(ratio "$(kv "$PRIMARY_LINE" cc_1flow_kbps)" "$(kv "$OTHER_LINE" cc_1flow_kbps)")"
    RESULT_EXTRA+=" goodput_10flow_ratio=$(ratio "$(kv "$PRIMARY_LINE" cc_10flow_kbps)" "$(kv "$OTHER_LINE" cc_10flow_kbps)")"
fi
{
    echo
    echo "### Inner-queue AQM: unidirectional congestion, $RESULT_CC, same run"
    echo
    echo "| AQM | Base RTT (unloaded) | RTT, 1 flow | Goodput, 1 flow | Retransmissions, 10 flows | Goodput, 10 flows | RTT, 10 flows | AQM drops | AQM marks | Queue-full drops | Load (1 min, max) |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    while read -r line; do
        echo "$line" | awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            printf "| %s | %s ms | %s ms | %s kbit/s | %s %% | %s kbit/s | %s ms | %s | %s | %s | %s |\n",
                v["aqm"], v["base_rtt_ms"], v["cc_1flow_rtt_ms"], v["cc_1flow_kbps"],
                v["cc_10flow_retr_pct"], v["cc_10flow_kbps"], v["cc_10flow_rtt_ms"],
                v["aqm_drops"], v["aqm_marks"], v["queue_drops"], v["load1_max"] }'
    done <"$RUN_DIR/aqm-summary.txt"
    echo
    echo "Hosts' ECN: $ECN. Means over repetitions; RTT: the streams' smoothed RTT (iperf3); base RTT: ping through the tunnel after the warm-up, before any transfer; drops: gateway A towards B over the whole group; load: the machine's 1-minute load average during the group."
} >>"$MD"

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
echo "load average at the end (1, 5, 15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
sed 's/^/AQM /' "$RUN_DIR/aqm-summary.txt"
sed -n '2,$p' "$RUN_DIR/aqm-summary.txt" | while read -r line; do
    a=$(kv "$line" aqm)
    echo "RESULT_$(echo "${a//-/}" | tr '[:lower:]' '[:upper:]') $line"
done
echo "$(grep '^RESULT ' "$RUN_DIR/report.out" | tail -1)$RESULT_EXTRA"
[ "$FAILED" -eq 0 ]
