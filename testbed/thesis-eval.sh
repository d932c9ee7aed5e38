#!/usr/bin/env bash
# testbed/thesis-eval.sh: the thesis' performance evaluation (seed 004, Campillo, §5.3 and §6.2)
# on our testbed, for four categories measured one after the other in the same run:
#
#   plain  no protection: the hosts talk over their uplinks directly (the thesis' 1-Ethernet,
#          TOE disabled); the reference every ratio is taken against
#   none   psp-gateway, suite none (the thesis' PSP-noENC-noHMAC)
#   full   psp-gateway, suite bf-cbc-hmac-sha1 (the thesis' PSP-FULL: Blowfish-CBC + HMAC-SHA1)
#   aes    psp-gateway, suite aes128-gcm
#
#   vm1 (client)                                                        vm2 (server)
#   10.77.0.1 psp0 --psp-gateway-- up0 --+                  +-- up0 --psp-gateway-- psp0 10.77.0.2
#   (plain: 192.168.50.1 on up0) ........[ lan: bridge br0 ]........ (plain: 192.168.50.2 on up0)
#                                                  |
#                                            up0  eve (idle, promiscuous: the hub floods to her too)
#
# Usage: testbed/thesis-eval.sh [--quick] [--no-build] [--only LIST] [--keep]
#   --quick      a development run: SIPp for 10 s per call rate, 3 s iperf3 runs, a 20 MB file,
#                5 ARP and 10 ICMP probes (the full run: 60 s, 10 s, 200 MB, 20 and 20)
#   --no-build   skip `cargo build` and use $TB_BIN (default target/release/psp-gateway)
#   --only LIST  comma-separated categories (default plain,none,full,aes; plain is always run:
#                it is the reference)
#   --keep       keep the run directory (logs, SIPp statistics, captures) under /tmp
#
# Per category, on a fresh copy of the testbed topology (testbed/lib.sh), client vm1 and
# server vm2, as in the thesis:
#   ARP     resolutions from vm1: both neighbour caches flushed, then `arping -c 1` (one
#           broadcast request); mean request -> reply time in ms as arping measures it
#   ICMP    ping vm1 -> vm2 (0.2 s apart, after one warm-up ping), mean RTT in ms
#   VoIP    SIPp: a `uas` on vm2 (with -rtp_echo, so the media port answers) and on vm1 the
#           thesis' command `sipp -sn uac_pcap -d 20000 -s 1001 SERVER -l 100 -r 8` for 60 s
#           (-m 480 calls); each call plays G.711 A-law RTP from a pcap. Success = SIPp's
#           successful calls / calls created. Jitter: vm2 captures the RTP arriving on its
#           interface; each call's RFC 3550 interarrival jitter as Wireshark computes it (the
#           thesis used Wireshark) from tshark's per-packet fields; we report the mean over the
#           calls of each call's mean and max jitter
#   TCP     iperf3 vm1 -> vm2, one stream, 10 s (the thesis' iperf default)
#   UDP     iperf3 -u -b 1000M vm1 -> vm2, 10 s, datagrams filling the interface MTU (iperf
#           2's 1470-byte default on the thesis' 1500-byte Ethernet); received rate
#   SCP     scp of a 200 MB file of zeros (the thesis' dd if=/dev/zero) vm1 -> vm2, MB/s
#   VoIP x10  the SIPp run again at 80 calls/s with at most 1000 calls (10x the thesis' rate;
#           the limit grows with it, or it would cap the rate instead)
# Offloads (TSO, GSO, GRO) are off on both uplinks in every category, as on the thesis'
# baseline (1-Ethernet, TOE disabled).
#
# Output: one block per category, a markdown table beside the thesis' figures (ratios against
# plain measured in this run) and, last, one line
#   RESULT full_call_success_pct=… full_tcp_of_plain=… none_tcp_of_plain=… aes_tcp_of_plain=… aes_call_success_pct_10x=…
# (*_tcp_of_plain: iperf3 TCP throughput of the category / that of plain, a fraction; the
# thesis' FULL figure, 3.42 %, is 0.0342 on this scale). Exit 0 only if every measurement ran
# (not: if it met a target); 1 otherwise (the RESULT line says n/a where a figure is missing);
# 2 on bad arguments. Everything is torn down on every exit path.
set -uo pipefail

QUICK=0
BUILD=1
KEEP=0
ONLY=plain,none,full,aes
usage() {
    sed -n '/^# Usage:/,/^#   --keep/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit "${1:-2}"
}
while (($#)); do
    case $1 in
    --quick) QUICK=1; shift ;;
    --no-build) BUILD=0; shift ;;
    --only) ONLY=${2:?--only needs a list}; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h | --help) usage 0 ;;
    *) echo "thesis-eval: error: unknown argument '$1'" >&2; usage ;;
    esac
done
[[ $(id -u) -eq 0 ]] || { echo "thesis-eval: error: run as root (network namespaces)" >&2; exit 1; }

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

declare -A SUITE=([none]=none [full]=bf-cbc-hmac-sha1 [aes]=aes128-gcm)
CATS=(plain)
IFS=, read -ra WANT <<<"$ONLY"
for c in none full aes; do
    for w in "${WANT[@]}"; do [[ $w == "$c" ]] && CATS+=("$c"); done
done
for w in "${WANT[@]}"; do
    [[ $w =~ ^(plain|none|full|aes)$ ]] || { echo "thesis-eval: error: unknown category '$w'" >&2; exit 2; }
done

# The thesis' load (§6.2.2) and tool defaults (§6.2.4-6.2.6); --quick shortens the durations.
RATE=8 LIMIT=100
if ((QUICK)); then
    SIP_S=10 IPERF_T=3 FILE_MB=20 ARPS=5 PINGS=10
else
    SIP_S=60 IPERF_T=10 FILE_MB=200 ARPS=20 PINGS=20
fi
MISSING=()
declare -A R # R[cat.key] = figure
missing() { MISSING+=("$*"); echo "  MISSING: $*"; }
ok() { echo "  ok: $*"; }
die() { echo "thesis-eval: error: $*" >&2; exit 1; }
phase() { printf '\n== %s\n' "$*"; }

phase "dependencies and build"
"$HERE/install-deps.sh" || die "installing dependencies failed"
if ((BUILD)); then
    (cd "$TB_ROOT" && cargo build --release --locked -p psp-gateway) || die "cargo build failed"
fi
[[ -x $TB_BIN ]] || die "no binary at $TB_BIN after the build"
RUN_DIR=$(mktemp -d /tmp/psp-thesis-eval.XXXXXX) || die "mktemp failed"
CPU=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
echo "  $CPU, $(nproc) CPUs; run directory $RUN_DIR"

# The current category's topology goes on every exit path; the run directory unless --keep.
cleanup() {
    local rc=$?
    tb_teardown
    if ((KEEP)); then echo "thesis-eval: kept $RUN_DIR" >&2; else rm -rf "$RUN_DIR"; fi
    return "$rc"
}
trap cleanup EXIT
trap 'cleanup; trap - EXIT; exit 130' INT
trap 'cleanup; trap - EXIT; exit 143' TERM

# topology CAT: a fresh lib.sh topology in $RUN_DIR/CAT; sets DEV, SRC, DST (vm1's address,
# vm2's address, the interface they are on).
topology() {
    local cat=$1 n
    export TB_SFX="te$$$cat" TB_DIR=$RUN_DIR/$cat
    mkdir -p "$TB_DIR"
    tb_init && tb_up 2 raw || return 1
    for n in 1 2; do
        # The thesis' baseline NIC: no TCP offloads (TSO/GSO/GRO off), on every category's uplink.
        tb_x "vm$n" ethtool -K up0 tso off gso off gro off >/dev/null 2>&1 ||
            tb_die "ethtool -K up0 in vm$n failed" || return 1
    done
    if [[ $cat == plain ]]; then
        # Addresses on the uplinks and nothing between them; no static neighbours (ARP is measured).
        for n in 1 2; do ip -n "$(tb_ns "vm$n")" addr add "$(tb_up_ip "$n")/24" dev up0 || return 1; done
        DEV=up0 SRC=$(tb_up_ip 1) DST=$(tb_up_ip 2)
    else
        tb_keys "${SUITE[$cat]}" && tb_config 1 "${SUITE[$cat]}" raw && tb_config 2 "${SUITE[$cat]}" raw &&
            tb_gw_start 1 && tb_gw_start 2 || return 1
        DEV=psp0 SRC=$(tb_ip 1) DST=$(tb_ip 2)
    fi
    MTU=$(tb_x vm1 cat "/sys/class/net/$DEV/mtu")
}

# sip CAT KEY RATE LIMIT: one SIPp run; sets R[CAT.KEY_pct], R[CAT.KEY_jit_mean], R[CAT.KEY_jit_max].
sip() {
    local cat=$1 key=$2 rate=$3 limit=$4 calls=$(($3 * SIP_S)) w=$TB_DIR/sipp-$2 cap
    mkdir -p "$w" && ln -sfn /usr/share/sip-tester "$w/pcap" # uac_pcap plays pcap/g711a.pcap
    tb_tcpdump vm2 "$w/tcpdump.log" -i "$DEV" -nn -s 96 -B 65536 -U -w "$w/rtp.pcap" \
        "udp and src host $SRC and not port 5060" || { missing "$cat $key: capture"; return; }
    cap=$TB_LAST_PID
    # -recv_timeout: a call waiting 10 s for an answer fails; -timeout ends SIPp however it goes.
    (cd "$w" && tb_x vm1 timeout $((SIP_S + 120)) sipp -sn uac_pcap -d 20000 -s 1001 "$DST" -i "$SRC" \
        -l "$limit" -r "$rate" -m "$calls" -recv_timeout 10000 -timeout $((SIP_S + 60))s -nostdin \
        -trace_stat -stf "$w/stat.csv" -fd 1 -trace_err -error_file "$w/errors.log" \
        >"$w/uac.out" 2>"$w/uac.err")
    local rc=$?
    sleep 1
    tb_kill "$cap"
    # SIPp exits 0 when every call succeeded, 1 when some failed; anything else is an error.
    if ((rc > 1)) || [[ ! -s $w/stat.csv ]]; then
        missing "$cat $key: sipp exited $rc: $(tail -3 "$w/uac.err" | tr '\n' ' ')"
        return
    fi
    local created ok_calls
    read -r created ok_calls < <(awk -F';' 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i }
        END { print $col["TotalCallCreated"], $col["SuccessfulCall(C)"] }' "$w/stat.csv")
    if ((created > 0)); then
        R[$cat.${key}_pct]=$(awk -v s="$ok_calls" -v c="$created" 'BEGIN { printf "%.2f", 100 * s / c }')
        R[$cat.${key}_calls]="$ok_calls/$created"
        ok "SIPp ${rate} calls/s for ${SIP_S} s (limit $limit): $ok_calls of $created calls succeeded (${R[$cat.${key}_pct]} %)"
    else
        missing "$cat $key: SIPp created no calls"
    fi
    # RFC 3550 interarrival jitter of each call's audio stream (payload type 8, G.711 A-law,
    # 8000 Hz), computed as Wireshark's RTP stream analysis does (J += (|D| - J) / 16 per
    # packet; a stream's mean is the mean of J over its packets, its max the largest J), from
    # tshark's per-packet fields. Not tshark's own `-z rtp,streams` table: SIPp's media ports
    # (6000 + 4n) repeat after ~2 500 calls (observed), and every call plays the same pcap with
    # the same SSRC, so at 10x the table merges calls 31 s apart into one "stream". A stream here
    # is a source port's packets until a gap of over 2 s or a sequence number going back.
    local jit
    jit=$(tshark -r "$w/rtp.pcap" -o rtp.heuristic_rtp:TRUE -Y "rtp.p_type == 8" -T fields \
        -e frame.time_epoch -e udp.srcport -e rtp.seq -e rtp.timestamp 2>/dev/null | awk '
        function close_stream(k) {
            if (n[k] > 0) { streams++; means += sum[k] / n[k]; maxes += mx[k] }
            j[k] = 0; sum[k] = 0; n[k] = 0; mx[k] = 0
        }
        {
            t = $1; k = $2; seq = $3; ts = $4
            if ((k in lt) && t - lt[k] < 2 && (seq - ls[k] + 65536) % 65536 < 32768) {
                dts = ts - lts[k]
                if (dts < -2147483648) dts += 4294967296
                d = (t - lt[k]) * 1000 - dts / 8
                if (d < 0) d = -d
                j[k] += (d - j[k]) / 16
            } else {
                if (k in lt) close_stream(k)
                j[k] = 0
            }
            sum[k] += j[k]; n[k]++; if (j[k] > mx[k]) mx[k] = j[k]
            lt[k] = t; ls[k] = seq; lts[k] = ts
        }
        END {
            for (k in lt) close_stream(k)
            if (streams) printf "%.3f %.3f %d\n", means / streams, maxes / streams, streams
        }')
    if [[ -n $jit ]]; then
        read -r "R[$cat.${key}_jit_mean]" "R[$cat.${key}_jit_max]" "R[$cat.${key}_streams]" <<<"$jit"
        ok "jitter over ${R[$cat.${key}_streams]} RTP streams: mean ${R[$cat.${key}_jit_mean]} ms, max ${R[$cat.${key}_jit_max]} ms (per-call averages)"
    else
        missing "$cat $key: no RTP stream in vm2's capture"
    fi
    local drops
    drops=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$w/tcpdump.log")
    [[ ${drops:-0} == 0 ]] || echo "  note: vm2's capture dropped $drops packets (jitter from the rest)"
    ((KEEP)) || rm -f "$w/rtp.pcap" # up to ~130 MB at 10x
}

measure() {
    local cat=$1 out v
    phase "category $cat${SUITE[$cat]:+ (suite ${SUITE[$cat]})}"
    topology "$cat" || { missing "$cat: setting up the topology failed"; tb_teardown; return; }
    # The machine may be shared: the 1-minute load average at the start goes into the summary.
    R[$cat.load]=$(cut -d' ' -f1 /proc/loadavg)
    echo "  $SRC -> $DST on $DEV, MTU $MTU; load average ${R[$cat.load]}"

    # ARP: ARPS resolutions, each with both neighbour caches flushed and one broadcast request;
    # arping prints the request -> reply time ("Unicast reply from ... 0.563ms").
    local i times=()
    for ((i = 0; i < ARPS; i++)); do
        tb_x vm1 ip neigh flush dev "$DEV"
        tb_x vm2 ip neigh flush dev "$DEV"
        out=$(tb_x vm1 arping -c 1 -w 3 -I "$DEV" "$DST" 2>&1)
        v=$(grep -o '[0-9.]*ms$' <<<"$out" | tr -d ms) && times+=("$v")
        sleep 0.1
    done
    if ((${#times[@]})); then
        R[$cat.arp_ms]=$(printf '%s\n' "${times[@]}" | awk '{ s += $1 } END { printf "%.3f", s / NR }')
        ok "ARP: ${#times[@]} of $ARPS resolutions answered, mean ${R[$cat.arp_ms]} ms"
    else
        missing "$cat ARP: $(tail -2 <<<"$out" | tr '\n' ' ')"
    fi

    tb_x vm1 ping -c 1 -W 3 "$DST" >/dev/null 2>&1
    out=$(tb_x vm1 ping -c "$PINGS" -i 0.2 -q "$DST" 2>&1)
    v=$(sed -n 's|.*= [0-9.]*/\([0-9.]*\)/.*|\1|p' <<<"$out")
    if [[ -n $v ]]; then R[$cat.icmp_ms]=$v; ok "ICMP: $PINGS pings, mean RTT $v ms"; else missing "$cat ICMP: $(tail -2 <<<"$out" | tr '\n' ' ')"; fi

    tb_bg vm2 "$TB_DIR/uas.log" sipp -sn uas -i "$DST" -rtp_echo -nostdin -trace_err \
        -error_file "$TB_DIR/uas-errors.log"
    sip "$cat" x1 "$RATE" "$LIMIT"

    tb_bg vm2 "$TB_DIR/iperf3-server.log" iperf3 -s -B "$DST"
    if v=$(tb_iperf3 1 "$DST" "$IPERF_T"); then R[$cat.tcp]=$v; ok "iperf3 TCP: $v Mbit/s"; else missing "$cat iperf3 TCP"; fi
    if v=$(tb_iperf3 1 "$DST" "$IPERF_T" -u -b 1000M -l $((MTU - 28))); then
        R[$cat.udp]=$v
        ok "iperf3 UDP at 1000 Mbit/s offered, $((MTU - 28))-byte datagrams: $v Mbit/s received"
    else
        missing "$cat iperf3 UDP"
    fi

    local f=$TB_DIR/dummyfile t0 ms
    head -c "$((FILE_MB * 1024 * 1024))" /dev/zero >"$f"
    if tb_sshd 2 "$DST" && tb_ssh_wait 1 "$DST"; then
        t0=$(date +%s%N)
        if tb_x vm1 scp "${TB_SSH_OPTS[@]}" -q "$f" "root@$DST:$TB_DIR/recv" 2>"$TB_DIR/scp.err" &&
            cmp -s "$f" "$TB_DIR/recv"; then
            ms=$((($(date +%s%N) - t0) / 1000000))
            R[$cat.scp]=$(awk -v mb="$FILE_MB" -v ms="$ms" 'BEGIN { printf "%.1f", mb * 1.048576 * 1000 / ms }')
            ok "scp of $FILE_MB MiB in $ms ms: ${R[$cat.scp]} MB/s"
        else
            missing "$cat scp: $(cat "$TB_DIR/scp.err")"
        fi
    else
        missing "$cat scp: no ssh login"
    fi
    rm -f "$f" "$TB_DIR/recv"

    sip "$cat" x10 $((RATE * 10)) $((LIMIT * 10))

    if [[ $cat != plain ]]; then
        local d
        d=$(tb_status 1 --json | jq -r '.drops_total')
        echo "  vm1 gateway: $d drops; vm2 gateway: $(tb_status 2 --json | jq -r '.drops_total') drops"
        tb_gw_stop 1 || echo "  note: the vm1 gateway did not exit cleanly"
        tb_gw_stop 2 || echo "  note: the vm2 gateway did not exit cleanly"
    fi
    tb_teardown
}

for c in "${CATS[@]}"; do measure "$c"; done

# g KEY: a figure or n/a. ratio CAT KEY: CAT's figure / plain's (a fraction), pct: in percent.
g() { echo "${R[$1]:-n/a}"; }
ratio() {
    local a=${R[$1.$2]:-} b=${R[plain.$2]:-}
    if [[ -n $a && -n $b ]]; then awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.4f", a / b; else print "n/a" }'; else echo n/a; fi
}
pct() {
    local r
    r=$(ratio "$1" "$2")
    if [[ $r == n/a ]]; then echo n/a; else awk -v r="$r" 'BEGIN { printf "%.2f %%", 100 * r }'; fi
}
more() {
    local r
    r=$(ratio "$1" "$2")
    if [[ $r == n/a ]]; then echo n/a; else awk -v r="$r" 'BEGIN { printf "%+.1f %%", 100 * (r - 1) }'; fi
}

phase "summary"
echo "  $CPU, $(nproc) CPUs; $(date -u '+%Y-%m-%d %H:%M UTC'); mode $( ((QUICK)) && echo quick || echo full)"
echo "  1-minute load average at the start of each category:$(for c in "${CATS[@]}"; do printf ' %s %s' "$c" "$(g "$c.load")"; done)"
echo
echo "| category | ARP ms | ICMP ms | calls ok (x1) | jitter mean/max ms | TCP Mbit/s | UDP Mbit/s | SCP MB/s | calls ok (x10) | jitter x10 mean/max ms |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for c in "${CATS[@]}"; do
    echo "| $c | $(g "$c.arp_ms") | $(g "$c.icmp_ms") | $(g "$c.x1_pct") % ($(g "$c.x1_calls")) | $(g "$c.x1_jit_mean") / $(g "$c.x1_jit_max") | $(g "$c.tcp") | $(g "$c.udp") | $(g "$c.scp") | $(g "$c.x10_pct") % ($(g "$c.x10_calls")) | $(g "$c.x10_jit_mean") / $(g "$c.x10_jit_max") |"
done
echo
echo "Beside the thesis (ratios against plain in this run; thesis: against 1-Ethernet):"
echo
echo "| category | ARP RTT vs plain (thesis) | ICMP RTT vs plain (thesis) | calls ok (thesis) | TCP of plain (thesis) | UDP of plain (thesis) | SCP of plain | calls ok at 10x |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
declare -A T_ARP=([none]="+19.23 %" [full]="+100.71 %") T_ICMP=([none]="+27.21 %" [full]="+117 %")
declare -A T_CALLS=([plain]="100 %" [none]="100 %" [full]="98.14 %") T_TCP=([none]="30.69 %" [full]="3.42 %")
declare -A T_UDP=([none]="61.25 %" [full]="8.25 %")
for c in "${CATS[@]}"; do
    [[ $c == plain ]] && continue
    echo "| $c | $(more "$c" arp_ms) (${T_ARP[$c]:--}) | $(more "$c" icmp_ms) (${T_ICMP[$c]:--}) | $(g "$c.x1_pct") % (${T_CALLS[$c]:--}) | $(pct "$c" tcp) (${T_TCP[$c]:--}) | $(pct "$c" udp) (${T_UDP[$c]:--}) | $(pct "$c" scp) | $(g "$c.x10_pct") % |"
done
echo
if ((${#MISSING[@]})); then
    echo "  ${#MISSING[@]} measurement(s) did not run:"
    printf '    - %s\n' "${MISSING[@]}"
else
    echo "  every measurement ran"
fi
echo "RESULT full_call_success_pct=$(g full.x1_pct) full_tcp_of_plain=$(ratio full tcp) none_tcp_of_plain=$(ratio none tcp) aes_tcp_of_plain=$(ratio aes tcp) aes_call_success_pct_10x=$(g aes.x10_pct)"
((${#MISSING[@]} == 0))
