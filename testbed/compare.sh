#!/usr/bin/env bash
# testbed/compare.sh: tunnel throughput of psp-gateway (raw and UDP uplinks) next to plain veth,
# tinc, OpenVPN, boringtun and wireguard-go, on the same topology in the same run. Root; not in
# CI (it takes minutes).
#
# Usage:
#   sudo testbed/compare.sh [--runs N] [--time S] [--quick] [--only LIST] [--skip LIST]
#                           [--udp-len BYTES] [--small-len BYTES] [--small-time S]
#                           [--small-steps N] [--pings N] [--no-build] [--no-write]
#                           [--note TEXT] [--keep]
#
#   --runs N        repetitions of every measurement; the table shows medians (default 3)
#   --time S        seconds per iperf3 test (default 5; TCP tests also omit 1 s of slow start)
#   --quick         1 run of 2 s (a smoke run; figures are indicative only)
#   --only LIST     comma-separated candidates to run (default: all, in this order):
#                   veth psp-none psp-bf psp-aes128gcm psp-scramble psp-none-udp psp-bf-udp
#                   psp-aes128gcm-udp psp-scramble-udp tinc openvpn boringtun wireguard-go
#                   veth-jumbo psp-none-jumbo
#   --skip LIST     comma-separated candidates to leave out
#   --udp-len B     UDP datagram payload for every candidate (default 1372: a 1400-byte IP
#                   packet, which fits every tunnel's inner MTU; lowered per candidate if not)
#   --small-len B   the small-packet test's UDP payload (default 172: a G.711 RTP packet at
#                   20 ms, 160 bytes of audio and a 12-byte RTP header)
#   --small-time S  seconds per small-packet iperf3 test (default 3; --quick: 2)
#   --small-steps N rate steps of the small-packet search after the unlimited test (default 4)
#   --pings N       pings per RTT measurement, 0.05 s apart (default 20)
#   --no-build      use the existing target/release/psp-gateway (default: cargo build --release)
#   --no-write      do not touch BENCHMARKS.md
#   --note TEXT     a sentence added under the table (e.g. "machine busy with builds")
#   --keep          keep the run directory (configs, logs, raw iperf3 JSON) under /tmp
#
# Candidates, each on a fresh copy of the testbed topology (testbed/lib.sh: namespaces vm1, vm2
# with up0 veths into the lan bridge; see "Local changes" below):
#   veth            iperf3 between the uplink IPs 192.168.50.1 -> .2, no tunnel
#   psp-*           psp-gateway (release build), raw uplink (EtherType 0x1982 on up0), TAP psp0
#                   10.77.0.1/.2, suites none, bf-cbc-hmac-sha1, aes128-gcm, scramble-hmac-sha1
#   psp-*-udp       the same four suites on the UDP uplink (lib.sh's udp mode: datagrams to port
#                   5198 between the uplink IPs 192.168.50.1/.2)
#   veth-jumbo      plain veth with MTU 9000 on every port of the segment (up0 and the bridge's)
#   psp-none-jumbo  psp-gateway `none`, raw uplink, on that MTU 9000 segment (the TAP MTU follows
#                   the uplink's: 9000 minus the PSP overhead)
#   tinc            tinc 1.0 (Debian), switch mode, Cipher = blowfish, Digest = sha1 (anchors/tinc.sh)
#   openvpn         OpenVPN 2.6 (Debian), dev tap, static key, BF-CBC + SHA1 (anchors/openvpn.sh)
#   boringtun       boringtun-cli from crates.io, single-threaded, configured with wg
#                   (anchors/boringtun.sh)
#   wireguard-go    wireguard-go (Debian), Go's default threads, configured with wg; a TUN,
#                   as there is no wireguard kernel module here (anchors/wireguard-go.sh)
# The anchors install themselves (apt-get, cargo install into /var/cache/psp-compare).
#
# Per candidate and run: iperf3 TCP vm1 -> vm2 with 1 stream and with 4 (-P 4); iperf3 UDP at
# full rate (-u -b 0), received rate and loss; small packets: the packets per second of
# --small-len byte UDP payloads delivered at under 1 % loss (below); ping RTT (average of
# --pings pings). The table
# (medians over the runs) goes between the compare markers in BENCHMARKS.md, with ratios to
# plain veth and to the best peer (best TCP x1 of tinc, OpenVPN, boringtun, wireguard-go: all
# userspace). The output ends with two lines, the raw uplink's last:
#   RATIOS_UDP aes128gcm_udp_vs_boringtun=... aes128gcm_udp_vs_wggo=... bf_udp_vs_tinc=...
#              none_udp_vs_veth=... added_rtt_udp_ms=... udp_udp_vs_veth=...
#              small_pps_udp_vs_boringtun=...                         (one line; informational)
#   RATIOS aes128gcm_vs_boringtun=... bf_vs_tinc=... none_vs_veth=... added_rtt_ms=...
#          aes128gcm_vs_wggo=... udp_vs_veth=... small_pps_vs_boringtun=...
#          jumbo_none_vs_veth=...                                     (one line)
# (TCP x1 ratios; added_rtt_ms = psp `none` ping RTT minus plain veth ping RTT; udp_vs_veth =
# `aes128-gcm`'s received UDP rate / plain veth's, both at full rate with --udp-len datagrams;
# small_pps_vs_boringtun = `aes128-gcm`'s small-packet rate / boringtun's; jumbo_none_vs_veth =
# TCP x1 of psp-none-jumbo / veth-jumbo.)
#
# The small-packet search, per run: one unlimited test (-u -b 0 -l B) gives the rate the
# candidate delivers when flooded (R, packets/s) and the rate offered (S); then --small-steps
# tests at a fixed offered rate, first R, then bisecting between the highest rate that met the
# bound and the lowest that did not (halving while none has). The figure is the highest
# received rate among the tests with under 1 % loss (iperf3's lost_percent at the receiver; the
# unlimited test counts too), n/a if none had. Its resolution is about R / 2^(steps-1).
# Exit status: 0 when every selected candidate was measured, 1 otherwise (the RATIOS line is
# printed either way, n/a where a figure is missing), 2 on bad arguments.
#
# Local changes to the lib.sh topology (for a fair benchmark; lib.sh itself is unchanged):
# the bridge learns addresses (lib.sh makes it a hub so eve sees everything) and eve's port is
# removed, so each frame crosses exactly the two veths and the bridge. The anchors get the
# uplink IPs with tb_uplink_addrs; psp runs on the raw uplink as in demo.sh, the -udp rows on
# lib.sh's udp mode (tb_up 2 udp: the same uplink IPs and static neighbours).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
# shellcheck source=anchors/common.sh
. "$HERE/anchors/common.sh"

ALL_CANDIDATES=(veth psp-none psp-bf psp-aes128gcm psp-scramble
    psp-none-udp psp-bf-udp psp-aes128gcm-udp psp-scramble-udp
    tinc openvpn boringtun wireguard-go veth-jumbo psp-none-jumbo)
PEERS=(tinc openvpn boringtun wireguard-go) # each has anchors/<name>.sh
RUNS=3
TIME=5
UDP_LEN=1372
SMALL_LEN=172
SMALL_TIME=3
SMALL_STEPS=4
JUMBO_MTU=9000
PINGS=20
SETTLE=2
PAUSE=1
BUILD=1
WRITE=1
KEEP=0
QUICK=0
NOTE=""
ONLY=""
SKIP=""
ARGS_STR=""
[ $# -eq 0 ] || ARGS_STR=$(printf ' %q' "$@")

usage() {
    sed -n '/^# Usage:/,/^# Candidates,/p' "$0" | sed '$d; s/^# \{0,1\}//'
}
bad_usage() {
    echo "compare.sh: error: $*" >&2
    echo "run 'testbed/compare.sh --help' for the options" >&2
    exit 2
}
say() { echo "== $*" >&2; }

while [ $# -gt 0 ]; do
    case $1 in
    --runs) RUNS=${2:-}; shift 2 || bad_usage "--runs needs a value" ;;
    --time) TIME=${2:-}; shift 2 || bad_usage "--time needs a value" ;;
    --quick) QUICK=1; RUNS=1; TIME=2; SMALL_TIME=2; SETTLE=1; PAUSE=0.5; shift ;;
    --only) ONLY=${2:-}; shift 2 || bad_usage "--only needs a value" ;;
    --skip) SKIP=${2:-}; shift 2 || bad_usage "--skip needs a value" ;;
    --udp-len) UDP_LEN=${2:-}; shift 2 || bad_usage "--udp-len needs a value" ;;
    --small-len) SMALL_LEN=${2:-}; shift 2 || bad_usage "--small-len needs a value" ;;
    --small-time) SMALL_TIME=${2:-}; shift 2 || bad_usage "--small-time needs a value" ;;
    --small-steps) SMALL_STEPS=${2:-}; shift 2 || bad_usage "--small-steps needs a value" ;;
    --pings) PINGS=${2:-}; shift 2 || bad_usage "--pings needs a value" ;;
    --no-build) BUILD=0; shift ;;
    --no-write) WRITE=0; shift ;;
    --note) NOTE=${2:-}; shift 2 || bad_usage "--note needs a value" ;;
    --keep) KEEP=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
    esac
done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || bad_usage "--runs must be a positive integer, got '$RUNS'"
[[ $TIME =~ ^[1-9][0-9]*$ ]] || bad_usage "--time must be a positive integer, got '$TIME'"
[[ $PINGS =~ ^[1-9][0-9]*$ ]] || bad_usage "--pings must be a positive integer, got '$PINGS'"
[[ $UDP_LEN =~ ^[0-9]+$ ]] && ((UDP_LEN >= 64 && UDP_LEN <= 1472)) ||
    bad_usage "--udp-len must be 64..1472, got '$UDP_LEN'"
[[ $SMALL_LEN =~ ^[0-9]+$ ]] && ((SMALL_LEN >= 16 && SMALL_LEN <= 1372)) ||
    bad_usage "--small-len must be 16..1372, got '$SMALL_LEN'"
[[ $SMALL_TIME =~ ^[1-9][0-9]*$ ]] || bad_usage "--small-time must be a positive integer, got '$SMALL_TIME'"
[[ $SMALL_STEPS =~ ^[0-9]+$ ]] || bad_usage "--small-steps must be a non-negative integer, got '$SMALL_STEPS'"
[ "$(id -u)" -eq 0 ] || bad_usage "run as root (network namespaces, TAPs, apt-get)"

in_list() { # WORD LIST(comma-separated)
    [[ ,$2, == *",$1,"* ]]
}
CANDIDATES=()
for c in "${ALL_CANDIDATES[@]}"; do
    [ -n "$ONLY" ] && ! in_list "$c" "$ONLY" && continue
    [ -n "$SKIP" ] && in_list "$c" "$SKIP" && continue
    CANDIDATES+=("$c")
done
for c in ${ONLY//,/ } ${SKIP//,/ }; do
    [[ " ${ALL_CANDIDATES[*]} " == *" $c "* ]] || bad_usage "unknown candidate '$c'"
done
[ ${#CANDIDATES[@]} -gt 0 ] || bad_usage "no candidate selected"

is_peer() { [[ " ${PEERS[*]} " == *" $1 "* ]]; }
suite_of() {
    local c=${1%-jumbo}
    case ${c%-udp} in
    psp-none) echo none ;;
    psp-bf) echo bf-cbc-hmac-sha1 ;;
    psp-aes128gcm) echo aes128-gcm ;;
    psp-scramble) echo scramble-hmac-sha1 ;;
    esac
}
uplink_of() { # a psp candidate's uplink kind (lib.sh: raw | udp)
    if [[ $1 == *-udp ]]; then echo udp; else echo raw; fi
}
is_jumbo() { [[ $1 == *-jumbo ]]; }
label_of() {
    case $1 in
    veth) echo "plain veth (no tunnel)" ;;
    veth-jumbo) echo "plain veth, MTU $JUMBO_MTU" ;;
    psp-*-jumbo) echo "psp-gateway \`$(suite_of "$1")\`, uplink MTU $JUMBO_MTU" ;;
    psp-*-udp) echo "psp-gateway \`$(suite_of "$1")\`, UDP uplink" ;;
    psp-*) echo "psp-gateway \`$(suite_of "$1")\`" ;;
    tinc) echo "tinc 1.0 Blowfish + HMAC-SHA1" ;;
    openvpn) echo "OpenVPN 2.6 BF-CBC + SHA1" ;;
    boringtun) echo "boringtun (1 thread)" ;;
    wireguard-go) echo "wireguard-go (Debian)" ;;
    esac
}

# --- the run directory and cleanup ------------------------------------------------------------
RUN_DIR=$(mktemp -d /tmp/psp-compare.XXXXXX)
chmod 700 "$RUN_DIR"
export TB_SFX="cmp$$"
CUR=""          # the candidate whose topology is up
CUR_ANCHOR=""   # its anchor script, if any

# Stop the current candidate's processes (anchor first, politely), then lib.sh's teardown
# kills whatever is left in the namespaces and deletes them. Afterwards nothing of ours runs.
cand_down() {
    [ -n "$CUR" ] || return 0
    if [ -n "$CUR_ANCHOR" ]; then
        "$HERE/anchors/$CUR_ANCHOR.sh" down "$TB_DIR/anchor" >/dev/null 2>&1 || true
    fi
    if [[ $CUR == psp-* ]]; then
        tb_gw_stop 1 || echo "compare.sh: warning: the vm1 gateway did not exit cleanly" >&2
        tb_gw_stop 2 || echo "compare.sh: warning: the vm2 gateway did not exit cleanly" >&2
    fi
    tb_teardown || true
    if ip netns list | awk '{print $1}' | grep -qE -- "-$TB_SFX\$"; then
        echo "compare.sh: warning: namespaces of $CUR survived teardown" >&2
    fi
    CUR="" CUR_ANCHOR=""
}
on_exit() {
    local rc=$?
    cand_down
    if [ "$KEEP" -eq 1 ]; then
        echo "compare.sh: run directory kept: $RUN_DIR" >&2
    else
        rm -rf "$RUN_DIR"
    fi
    return $rc
}
MEASURE_PID=""  # the subshell measuring the current candidate
on_signal() {
    [ -z "$MEASURE_PID" ] || kill -TERM "$MEASURE_PID" 2>/dev/null || true
    exit "$1"
}
trap on_exit EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

# --- measurement helpers ------------------------------------------------------------------------
median() { # NUMBERS...: the median (mean of the middle two for an even count); "n/a" if none
    local vals
    vals=$(printf '%s\n' "$@" | grep -E '^-?[0-9.]+([eE][-+]?[0-9]+)?$' | sort -g) || true
    [ -n "$vals" ] || { echo n/a; return; }
    echo "$vals" | awk '{v[NR] = $1} END {
        if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# iperf JSONFILE CLIENT-ARGS...: one iperf3 test vm1 -> vm2 with a fresh one-off server.
iperf() {
    local out=$1 spid i
    shift
    ip netns exec "$(tb_ns vm2)" iperf3 -s -1 -B "$TARGET" >>"$TB_DIR/iperf3-server.log" 2>&1 </dev/null &
    spid=$!
    for ((i = 0; i < 50; i++)); do
        [ -n "$(tb_x vm2 ss -Hltn "sport = :5201")" ] && break
        sleep 0.1
    done
    timeout $((TIME + 40)) ip netns exec "$(tb_ns vm1)" \
        iperf3 -c "$TARGET" -t "$TIME" -J --connect-timeout 5000 "$@" >"$out" 2>"$out.err" || true
    for ((i = 0; i < 30; i++)); do
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.1
    done
    kill -TERM "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    sleep "$PAUSE"
}
jnum() { # FILE JQ-EXPR: a number from iperf3's JSON, or n/a
    local v
    v=$(jq -r "$2 // empty" "$1" 2>/dev/null) || v=""
    [[ $v =~ ^[0-9.eE+-]+$ ]] && echo "$v" || echo n/a
}
mbps() { # bits/s -> Mbit/s with one decimal
    [ "$1" = n/a ] && { echo n/a; return; }
    awk -v b="$1" 'BEGIN {printf "%.1f", b / 1e6}'
}
iperf_error() { jq -r '.error // empty' "$1" 2>/dev/null || head -c 300 "$1"; head -c 300 "$1.err"; }

ping_avg() { # the average RTT in ms of PINGS pings vm1 -> TARGET, or n/a
    local out
    out=$(tb_x vm1 ping -c "$PINGS" -i 0.05 -q -W 1 "$TARGET" 2>&1) || true
    echo "$out" | awk -F/ '/^rtt/ {printf "%.3f", $5; found = 1} END {if (!found) print "n/a"}'
}

# --- per-candidate set-up -----------------------------------------------------------------------
# topology UPLINK(raw|udp) [MTU]: as lib.sh builds it, then the local changes described at the
# top; with MTU, every port of the segment (each up0 and its bridge end) gets that MTU.
topology() {
    tb_up 2 "$1"
    local lan i
    lan=$(tb_ns lan)
    ip -n "$lan" link set br0 type bridge ageing_time 30000
    ip -n "$lan" link del eve
    [ -n "${2:-}" ] || return 0
    for i in 1 2; do
        ip -n "$lan" link set "vm$i" mtu "$2"
        ip -n "$(tb_ns "vm$i")" link set up0 mtu "$2"
    done
}

# Sets TARGET and DESC; returns non-zero (with a message) if the candidate cannot run.
cand_up() {
    local c=$1 suite uplink
    uplink=$(uplink_of "$c")
    if is_jumbo "$c"; then topology "$uplink" "$JUMBO_MTU"; else topology "$uplink"; fi
    case $c in
    veth | veth-jumbo)
        tb_uplink_addrs
        TARGET=$(tb_up_ip 2)
        DESC="iperf3 between the uplink IPs on up0"
        ;;
    psp-*)
        [ -n "$PSP_OK" ] || { echo "psp-gateway unavailable: $PSP_WHY" >&2; return 1; }
        suite=$(suite_of "$c")
        tb_keys "$suite"
        tb_config 1 "$suite" "$uplink"
        tb_config 2 "$suite" "$uplink"
        tb_gw_start 2
        tb_gw_start 1
        TARGET=$(tb_ip 2)
        if [ "$uplink" = udp ]; then
            DESC="$PSP_VERSION, UDP uplink (port $TB_PORT), suite $suite"
        else
            DESC="$PSP_VERSION, raw uplink, suite $suite"
        fi
        ;;
    *)
        is_peer "$c" || { echo "unknown candidate $c" >&2; return 1; }
        tb_uplink_addrs
        DESC=$("$HERE/anchors/$c.sh" up "$TB_DIR/anchor" "$(tb_ns vm1)" "$(tb_ns vm2)") || return 1
        TARGET=$(tb_ip 2)
        ;;
    esac
    wait_for 10 tb_x vm1 ping -c1 -W1 "$TARGET" || {
        echo "$c: no ping reply from $TARGET" >&2
        return 1
    }
    # The interface carrying vm1's address, and its MTU.
    local src ifname
    if [[ $c == veth* ]]; then src=$(tb_up_ip 1); else src=$(tb_ip 1); fi
    ifname=$(tb_x vm1 ip -o -4 addr show to "$src/32" | awk '{print $2; exit}')
    MTU=$(tb_x vm1 cat "/sys/class/net/$ifname/mtu")
    sleep "$SETTLE"
}

# small_search FILE-PREFIX: the small-packet search described at the top; prints the packets
# per second delivered at under 1 % loss (n/a if no test met it) and says each step.
small_search() {
    local f=$1 bits=$((SMALL_LEN * 8)) step rate lo=0 hi best=n/a recv loss sent
    TIME=$SMALL_TIME iperf "$f-s0.json" -u -b 0 -l "$SMALL_LEN"
    recv=$(jnum "$f-s0.json" .end.sum_received.bits_per_second)
    sent=$(jnum "$f-s0.json" .end.sum_sent.bits_per_second)
    loss=$(jnum "$f-s0.json" .end.sum_received.lost_percent)
    if [ "$recv" = n/a ] || [ "$sent" = n/a ] || [ "$loss" = n/a ]; then
        echo "small-packet flood failed: $(iperf_error "$f-s0.json")" >&2
        echo n/a
        return
    fi
    recv=$(awk -v b="$recv" -v l="$bits" 'BEGIN {printf "%d", b / l}')
    hi=$(awk -v b="$sent" -v l="$bits" 'BEGIN {printf "%d", b / l}')
    awk -v l="$loss" 'BEGIN {exit !(l < 1)}' && best=$recv
    echo "small $SMALL_LEN B: flood delivered $recv pps of $hi offered (loss $loss %)" >&2
    rate=$recv
    for ((step = 1; step <= SMALL_STEPS; step++)); do
        ((rate > 0)) || break
        TIME=$SMALL_TIME iperf "$f-s$step.json" -u -b "$((rate * bits))" -l "$SMALL_LEN"
        recv=$(jnum "$f-s$step.json" .end.sum_received.bits_per_second)
        loss=$(jnum "$f-s$step.json" .end.sum_received.lost_percent)
        [ "$recv" = n/a ] || recv=$(awk -v b="$recv" -v l="$bits" 'BEGIN {printf "%d", b / l}')
        echo "small $SMALL_LEN B: offered $rate pps, delivered $recv (loss $loss %)" >&2
        if [ "$recv" != n/a ] && [ "$loss" != n/a ] && awk -v l="$loss" 'BEGIN {exit !(l < 1)}'; then
            if [ "$best" = n/a ] || ((recv > best)); then best=$recv; fi
            lo=$rate
        else
            hi=$rate
        fi
        if ((lo > 0)); then rate=$(((lo + hi) / 2)); else rate=$((rate / 2)); fi
    done
    echo "$best"
}

# measure CANDIDATE: runs the tests, writes one line to $RUN_DIR/results.tsv:
# id tcp1 tcp4 udp_mbps udp_loss ping_ms mtu udp_len small_pps desc
measure() {
    local c=$1 r f t1=() t4=() ur=() ul=() pg=() sp=() ulen=$UDP_LEN
    cand_up "$c"
    # The UDP datagram must fit the inner MTU (IP 20 + UDP 8 bytes of headers).
    ((ulen + 28 <= MTU)) || ulen=$((MTU - 28))
    say "$c: $DESC; inner MTU $MTU"
    for ((r = 1; r <= RUNS; r++)); do
        f=$TB_DIR/r$r
        iperf "$f-tcp1.json" -O 1
        t1+=("$(mbps "$(jnum "$f-tcp1.json" .end.sum_received.bits_per_second)")")
        [ "${t1[-1]}" = n/a ] && echo "$c: TCP x1 failed: $(iperf_error "$f-tcp1.json")" >&2
        iperf "$f-tcp4.json" -O 1 -P 4
        t4+=("$(mbps "$(jnum "$f-tcp4.json" .end.sum_received.bits_per_second)")")
        [ "${t4[-1]}" = n/a ] && echo "$c: TCP x4 failed: $(iperf_error "$f-tcp4.json")" >&2
        iperf "$f-udp.json" -u -b 0 -l "$ulen"
        ur+=("$(mbps "$(jnum "$f-udp.json" .end.sum_received.bits_per_second)")")
        ul+=("$(jnum "$f-udp.json" .end.sum_received.lost_percent)")
        [ "${ur[-1]}" = n/a ] && echo "$c: UDP failed: $(iperf_error "$f-udp.json")" >&2
        sp+=("$(small_search "$f")")
        pg+=("$(ping_avg)")
        say "$c run $r/$RUNS: TCP x1 ${t1[-1]} Mbit/s, TCP x4 ${t4[-1]}, UDP ${ur[-1]} Mbit/s" \
            "(loss $(printf "%.1f" "${ul[-1]}" 2>/dev/null || echo n/a) %), ${SMALL_LEN} B ${sp[-1]} pps," \
            "ping ${pg[-1]} ms"
    done
    if [[ $c == psp-* ]]; then
        # The gateways' own view: the suite really in use, and no drops.
        local j1 j2 s1 d1 d2
        j1=$(tb_status 1 --json) && j2=$(tb_status 2 --json) || { echo "$c: status failed" >&2; return 1; }
        s1=$(jq -r '.peers[0].suite' <<<"$j1")
        d1=$(jq -r '.drops_total' <<<"$j1")
        d2=$(jq -r '.drops_total' <<<"$j2")
        [ "$s1" = "$(suite_of "$c")" ] || { echo "$c: vm1's gateway runs suite '$s1'" >&2; return 1; }
        DESC="$DESC; status after the tests: vm1 tx $(jq -r '.peers[0].tx_frames' <<<"$j1") frames,"
        DESC="$DESC vm2 rx $(jq -r '.peers[0].rx_frames' <<<"$j2") frames, drops_total $d1 (vm1) / $d2 (vm2)"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$(median "${t1[@]}")" \
        "$(median "${t4[@]}")" "$(median "${ur[@]}")" "$(median "${ul[@]}")" \
        "$(median "${pg[@]}")" "$MTU" "$ulen" "$(median "${sp[@]}")" "$DESC" >>"$RUN_DIR/results.tsv"
    # A candidate with a missing figure counts as failed.
    [[ " ${t1[*]} ${t4[*]} ${ur[*]} ${pg[*]} " != *" n/a "* ]]
}

# --- preparation ------------------------------------------------------------------------------
say "run directory $RUN_DIR; runs $RUNS x ${TIME} s; candidates: ${CANDIDATES[*]}"
"$HERE/install-deps.sh" >/dev/null 2>&1 || "$HERE/install-deps.sh" ||
    { echo "compare.sh: error: testbed/install-deps.sh failed" >&2; exit 1; }
for c in "${CANDIDATES[@]}"; do
    is_peer "$c" || continue
    say "installing $c (if missing)"
    "$HERE/anchors/$c.sh" install || { echo "compare.sh: error: installing $c failed" >&2; exit 1; }
done

# The commit the binary is built from ("-dirty": uncommitted changes in the code it builds).
COMMIT=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
(cd "$ROOT" && git diff --quiet HEAD -- Cargo.toml Cargo.lock crates psp-gateway 2>/dev/null) ||
    COMMIT="$COMMIT-dirty"
PSP_OK="" PSP_WHY="" PSP_VERSION=""
if [[ " ${CANDIDATES[*]} " == *" psp-"* ]]; then
    if [ "$BUILD" -eq 1 ]; then
        say "cargo build --release -p psp-gateway"
        if ! (cd "$ROOT" && cargo build --release --locked -p psp-gateway) >"$RUN_DIR/build.log" 2>&1; then
            PSP_WHY="cargo build failed (see the log with --keep)"
            tail -5 "$RUN_DIR/build.log" >&2
        fi
    fi
    if [ -z "$PSP_WHY" ]; then
        if [ ! -x "$TB_BIN" ]; then
            PSP_WHY="no binary at $TB_BIN"
        elif ! "$TB_BIN" run --help >/dev/null 2>&1; then
            PSP_WHY="$TB_BIN has no 'run' command yet"
        else
            PSP_OK=1
            PSP_VERSION="psp-gateway $COMMIT"
        fi
    fi
    [ -n "$PSP_OK" ] || echo "compare.sh: warning: psp rows skipped: $PSP_WHY" >&2
fi

DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
CPU=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
MACHINE="$(nproc) CPUs, $CPU, Linux $(uname -r)"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$RUN_DIR/results.tsv"

# --- the runs ---------------------------------------------------------------------------------
FAILED=()
for c in "${CANDIDATES[@]}"; do
    say "$c: $(label_of "$c")"
    export TB_DIR="$RUN_DIR/$c"
    mkdir -p "$TB_DIR"
    CUR=$c
    if is_peer "$c"; then CUR_ANCHOR=$c; fi
    # In the background so that a signal interrupts `wait` at once (the trap then stops it).
    set +e
    (
        set -e
        measure "$c"
    ) &
    MEASURE_PID=$!
    wait "$MEASURE_PID"
    rc=$?
    MEASURE_PID=""
    set -e
    if [ $rc -ne 0 ]; then
        FAILED+=("$c")
        grep -q "^$c"$'\t' "$RUN_DIR/results.tsv" ||
            printf '%s\tn/a\tn/a\tn/a\tn/a\tn/a\tn/a\tn/a\tn/a\tfailed (see the messages above)\n' "$c" >>"$RUN_DIR/results.tsv"
        echo "compare.sh: warning: $c failed" >&2
        if [ "$KEEP" -eq 1 ]; then
            for f in "$TB_DIR"/*.log "$TB_DIR"/anchor/*.log; do
                [ -f "$f" ] && { echo "--- $f (last lines)" >&2; tail -5 "$f" >&2; }
            done
        fi
    fi
    cand_down
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the table ----------------------------------------------------------------------------------
field() { # ID COLUMN(2..10)
    awk -F'\t' -v id="$1" -v col="$2" '$1 == id {print $col; found = 1} END {if (!found) print "n/a"}' \
        "$RUN_DIR/results.tsv"
}
ratio() { # A B: A/B with 3 significant digits, or n/a
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "n/a" || b == "n/a" || b + 0 == 0) { print "n/a"; exit }
        r = a / b; if (r >= 10) printf "%.1f", r; else if (r >= 1) printf "%.2f", r; else printf "%.3f", r }'
}
diff_ms() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "n/a" || b == "n/a") { print "n/a"; exit } printf "%.3f", a - b }'
}

VETH_T1=$(field veth 2)
BEST_PEER="" BEST_T1=n/a
for p in "${PEERS[@]}"; do
    v=$(field "$p" 2)
    [ "$v" = n/a ] && continue
    if [ "$BEST_T1" = n/a ] || awk -v a="$v" -v b="$BEST_T1" 'BEGIN {exit !(a > b)}'; then
        BEST_T1=$v BEST_PEER=$p
    fi
done

TABLE=$RUN_DIR/table.md
{
    echo "## Tunnel comparison"
    echo
    echo "Written by \`testbed/compare.sh\` on $DATE; command: \`testbed/compare.sh$ARGS_STR\`"
    echo "(commit $COMMIT). Machine: $MACHINE;"
    echo "load average $LOAD_START at the start, $LOAD_END at the end."
    if [ "$QUICK" -eq 1 ]; then
        echo "**Quick run** (\`--quick\`: 1 run of ${TIME} s per test): indicative figures only."
    else
        echo "Medians of $RUNS runs; iperf3 tests of ${TIME} s (TCP after 1 s of omitted slow start)."
    fi
    [ -n "$NOTE" ] && echo "$NOTE"
    echo
    echo "Same topology for every row: network namespaces vm1 and vm2, each with a veth (up0)"
    echo "into a bridge; traffic vm1 -> vm2. psp-gateway runs on the raw uplink (EtherType"
    echo "0x1982) unless the row says UDP uplink (datagrams between the uplink IPs). UDP: one"
    echo "iperf3 stream at full rate (\`-u -b 0\`) with the datagram size given, received rate"
    echo "and loss. Small packets: UDP datagrams of $SMALL_LEN payload bytes (a G.711 RTP packet at"
    echo "20 ms), the highest rate in packets/s delivered at under 1 % loss (a search of"
    echo "$SMALL_STEPS rate steps after a flood, ${SMALL_TIME} s each: testbed/compare.sh's header)."
    echo "Ping: average RTT of $PINGS pings 0.05 s apart. Ratios are on single-stream"
    echo "TCP; \"best peer\" is the fastest of tinc, OpenVPN, boringtun and wireguard-go (all"
    echo "userspace) in this run${BEST_PEER:+ ($(label_of "$BEST_PEER"))}."
    echo
    echo "| candidate | TCP×1 Mbit/s | TCP×4 Mbit/s | UDP Mbit/s (loss) | ${SMALL_LEN} B pps (< 1 % loss) | ping ms | inner MTU | × plain veth | × best peer |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    while IFS=$'\t' read -r id t1 t4 ur ul pg mtu ulen spps desc; do
        ref_t1=$VETH_T1
        is_jumbo "$id" && ref_t1=$(field veth-jumbo 2)
        if [ "$ur" = n/a ]; then udp=n/a; else udp="$ur ($(awk -v l="$ul" 'BEGIN {printf "%.1f", l}') %, ${ulen} B)"; fi
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(label_of "$id")" "$t1" "$t4" "$udp" \
            "$spps" "$pg" "$mtu" "$(ratio "$t1" "$ref_t1")" "$(ratio "$t1" "$BEST_T1")"
    done <"$RUN_DIR/results.tsv"
    echo
    echo "What ran:"
    echo
    while IFS=$'\t' read -r id _ _ _ _ _ _ _ _ desc; do
        echo "- $(label_of "$id"): $desc"
    done <"$RUN_DIR/results.tsv"
} >"$TABLE"

# ratios SUFFIX: the ratio fields of the psp rows with that suffix ("" raw, "-udp"), one line.
ratios() {
    local x=$1 u=${1:+_udp}
    echo "aes128gcm${u}_vs_boringtun=$(ratio "$(field "psp-aes128gcm$x" 2)" "$(field boringtun 2)")" \
        "bf${u}_vs_tinc=$(ratio "$(field "psp-bf$x" 2)" "$(field tinc 2)")" \
        "none${u}_vs_veth=$(ratio "$(field "psp-none$x" 2)" "$VETH_T1")" \
        "added_rtt${u}_ms=$(diff_ms "$(field "psp-none$x" 6)" "$(field veth 6)")" \
        "aes128gcm${u}_vs_wggo=$(ratio "$(field "psp-aes128gcm$x" 2)" "$(field wireguard-go 2)")" \
        "udp${u}_vs_veth=$(ratio "$(field "psp-aes128gcm$x" 4)" "$(field veth 4)")" \
        "small_pps${u}_vs_boringtun=$(ratio "$(field "psp-aes128gcm$x" 9)" "$(field boringtun 9)")"
}
RATIOS="RATIOS $(ratios "") jumbo_none_vs_veth=$(ratio "$(field psp-none-jumbo 2)" "$(field veth-jumbo 2)")"
RATIOS_UDP="RATIOS_UDP $(ratios -udp)"
R_BEST=$(ratio "$(field psp-aes128gcm 2)" "$BEST_T1")
{
    echo
    echo "\`$RATIOS\`"
    echo "(targets: ≥ 3, ≥ 3, ≥ 0.35, ≤ 0.10, ≥ 2, ≥ 0.6, ≥ 2, ≥ 0.35; and \`aes128-gcm\` ≥ 2× the best peer:"
    echo "$R_BEST here${BEST_PEER:+, against $(label_of "$BEST_PEER")})"
    echo
    echo "\`$RATIOS_UDP\`"
    echo "(the same ratios for the UDP uplink rows; informational)"
} >>"$TABLE"

# Read-modify-write BENCHMARKS.md: replace only what lies between the markers (append the
# markers if they are missing); the rest of the file is kept byte for byte.
write_benchmarks() {
    local md=$ROOT/BENCHMARKS.md tmp begin='<!-- compare:begin -->' end='<!-- compare:end -->'
    [ -f "$md" ] || : >"$md"
    if ! grep -qxF "$begin" "$md" || ! grep -qxF "$end" "$md"; then
        printf '\n%s\n%s\n' "$begin" "$end" >>"$md"
    fi
    tmp=$(mktemp "$md.XXXXXX")
    awk -v begin="$begin" -v end="$end" -v table="$TABLE" '
        $0 == begin { print; print ""; while ((getline line < table) > 0) print line; skip = 1; next }
        $0 == end { print ""; skip = 0 }
        !skip { print }' "$md" >"$tmp"
    chmod --reference="$md" "$tmp" 2>/dev/null || true
    mv "$tmp" "$md"
}

echo
cat "$TABLE"
echo
if [ "$WRITE" -eq 1 ]; then
    write_benchmarks
    say "BENCHMARKS.md updated (between the compare markers)"
fi
[ ${#FAILED[@]} -eq 0 ] || say "failed: ${FAILED[*]}"
echo "$RATIOS_UDP"
echo "$RATIOS"
[ ${#FAILED[@]} -eq 0 ]
