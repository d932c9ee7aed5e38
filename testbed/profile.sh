#!/usr/bin/env bash
# testbed/profile.sh: where a packet's time goes in psp-gateway (BENCHMARKS.md "Where a packet's
# time goes"). Root; not in CI. Two gateways on the compare.sh topology (vm1, vm2 on a learning
# bridge, eve's port removed), one traffic pattern vm1 -> vm2, `perf record -a -g` over it, then
# the gateways' share of all samples split by stage (the system call or kernel path each sample
# sits under, inclusive) and the gateways' system calls per forwarded packet (`strace -c -f` in a
# second, separate pass: strace slows what it watches, so its pass gives counts, not times).
#
# Usage: sudo testbed/profile.sh [--uplink raw|udp] [--suite S] [--traffic KIND] [--seconds N]
#                                [--mtu M] [--binary PATH] [--keep]
#   --uplink   raw (default) or udp
#   --suite    default aes128-gcm
#   --traffic  udp (default: iperf3 -u -b 0 -l 1372), small (-u -b 0 -l 172), tcp (one stream),
#              ping (pings 5 ms apart: the wake-ups of one round trip)
#   --seconds  length of each pass (default 4)
#   --mtu      the segment's MTU (default 1500; 9000 for a jumbo segment)
#   --binary   the psp-gateway to profile (default target/release/psp-gateway)
#   --keep     keep the run directory (perf.data, reports)
#
# Output: the report's stage table, and one line
#   PROFILE traffic=… gw_pct=… user_pct=… crypto_pct=… tap_read_pct=… tap_write_pct=… tap_uring_pct=…
#           uplink_send_pct=… uplink_recv_pct=… wait_pct=… softirq_pct=… pkts=…
#           syscalls_per_pkt=… reads_per_pkt=… writes_per_pkt=… urings_per_pkt=… wakeups_per_pkt=…
# (each *_pct: % of all samples on both CPUs that fall in both gateways' threads and under that
# stage; gw_pct is the gateways' total. Stages overlap where a kernel path runs in another's
# context, e.g. the receive softirq a send triggers: softirq_pct is the part of the gateways'
# samples under net_rx_action, whichever system call it ran in.)
set -euo pipefail
UPLINK=raw SUITE=aes128-gcm TRAFFIC=udp SECS=4 MTU=1500 KEEP=0 BIN=""
while (($#)); do
    case $1 in
    --uplink) UPLINK=${2:?}; shift 2 ;;
    --suite) SUITE=${2:?}; shift 2 ;;
    --traffic) TRAFFIC=${2:?}; shift 2 ;;
    --seconds) SECS=${2:?}; shift 2 ;;
    --mtu) MTU=${2:?}; shift 2 ;;
    --binary) BIN=${2:?}; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h | --help) sed -n '/^# Usage:/,/^#   --keep/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "profile.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[[ $TRAFFIC =~ ^(udp|small|tcp|ping)$ ]] || { echo "profile.sh: --traffic udp|small|tcp|ping" >&2; exit 2; }
[[ $UPLINK =~ ^(raw|udp)$ ]] || { echo "profile.sh: --uplink raw|udp" >&2; exit 2; }
command -v perf >/dev/null || apt-get install -y -q linux-perf >/dev/null
command -v strace >/dev/null || apt-get install -y -q strace >/dev/null
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
[[ -z $BIN ]] || TB_BIN=$BIN
tb_pair "$UPLINK" "$SUITE"
lan=$(tb_ns lan)
ip -n "$lan" link set br0 type bridge ageing_time 30000
ip -n "$lan" link del eve
for i in 1 2; do
    ip -n "$lan" link set "vm$i" mtu "$MTU"
    ip -n "$(tb_ns "vm$i")" link set up0 mtu "$MTU"
done
tb_gw_start 2 >/dev/null
tb_gw_start 1 >/dev/null
for _ in $(seq 10); do tb_x vm1 ping -c1 -W1 "$(tb_ip 2)" >/dev/null && break; done
P1=$(cat "$TB_DIR/vm1.pid") P2=$(cat "$TB_DIR/vm2.pid")
tb_bg vm2 "$TB_DIR/iperf3-server.log" iperf3 -s -B "$(tb_ip 2)"
sleep 0.5

# traffic SECONDS: the chosen pattern vm1 -> vm2, in the foreground.
traffic() {
    case $TRAFFIC in
    udp) tb_x vm1 iperf3 -c "$(tb_ip 2)" -u -b 0 -l 1372 -t "$1" >/dev/null ;;
    small) tb_x vm1 iperf3 -c "$(tb_ip 2)" -u -b 0 -l 172 -t "$1" >/dev/null ;;
    tcp) tb_x vm1 iperf3 -c "$(tb_ip 2)" -t "$1" >/dev/null ;;
    ping) tb_x vm1 ping -q -c $(($1 * 200)) -i 0.005 "$(tb_ip 2)" >/dev/null ;;
    esac
}
# The frames vm2's gateway received from vm1 (datagrams and segments: with coalescing, the
# TAP's own counters count super-frames).
delivered() { tb_status 2 --json | jq '[.peers[].rx_frames] | add'; }
# The gateways' threads (perf's per-pid table lists threads).
TIDS=$(ls "/proc/$P1/task" "/proc/$P2/task" | grep -E '^[0-9]+$' | tr '\n' ' ')

# Pass 1: perf over the whole system.
traffic $((SECS + 2)) &
tp=$!
sleep 1
perf record -q -a -g -F 1999 -o "$TB_DIR/perf.data" -- sleep "$SECS" 2>/dev/null
wait "$tp" || true
perf report -i "$TB_DIR/perf.data" --stdio --no-children --sort pid -g none 2>/dev/null |
    grep -E '^ +[0-9]' >"$TB_DIR/by-pid.txt" || true
perf report -i "$TB_DIR/perf.data" --stdio --children --pid "$P1,$P2" --percentage relative --sort sym -g none 2>/dev/null |
    grep -E '^ +[0-9]' >"$TB_DIR/children.txt" || true
perf report -i "$TB_DIR/perf.data" --stdio --no-children --pid "$P1,$P2" --percentage relative --sort dso,sym -g none 2>/dev/null |
    grep -E '^ +[0-9]' >"$TB_DIR/self.txt" || true

# gw_pct: the two gateways' share of every sample.
GW=$(awk -v tids=" $TIDS " '{split($2, p, ":"); if (index(tids, " " p[1] " ")) {gsub("%", "", $1); s += $1}} END {printf "%.1f", s}' "$TB_DIR/by-pid.txt")
# inclusive % (of the gateways' samples, which --pid normalizes to) of the first symbol matching
child() { awk -v re="$1" '$0 ~ re {gsub("%", "", $1); s += $1; if (++n == 1) exit} END {printf "%.1f", s + 0}' "$TB_DIR/children.txt"; }
# self % of samples in the gateway binary's own code (and its crypto symbols)
selfsum() { awk -v re="$1" '$0 ~ re {gsub("%", "", $1); s += $1} END {printf "%.1f", s + 0}' "$TB_DIR/self.txt"; }
scale() { awk -v p="$1" -v g="$GW" 'BEGIN {printf "%.1f", p * g / 100}'; }
USER=$(scale "$(selfsum 'psp-gateway +[[][.][]] ')")
CRYPTO=$(scale "$(selfsum 'psp-gateway +[[][.][]] .*([Aa]es|gcm|[Gg]hash|[Cc]ha[Cc]ha|[Pp]oly|sha1|Sha1|[Bb]lowfish|bf::|[Hh]mac|scramble|polyval|ring_core)')")
TAP_READ=$(scale "$(child ' (__x64_sys_readv|do_readv|__x64_sys_read|ksys_read) *$')")
TAP_WRITE=$(scale "$(child ' (__x64_sys_writev|do_writev|__x64_sys_write|ksys_write) *$')")
# With `[interface] io_uring` the TAP's reads and writes both sit under io_uring_enter.
TAP_URING=$(scale "$(child ' (__x64_sys_io_uring_enter|__do_sys_io_uring_enter) *$')")
UP_SEND=$(scale "$(child ' (__x64_sys_sendmmsg|__x64_sys_sendmsg|__x64_sys_sendto) *$')")
UP_RECV=$(scale "$(child ' (__x64_sys_recvmmsg|__x64_sys_recvmsg|__x64_sys_recvfrom) *$')")
WAIT=$(scale "$(child ' (__x64_sys_epoll_wait|__x64_sys_epoll_pwait|__x64_sys_futex) *$')")
SOFTIRQ=$(scale "$(child ' net_rx_action *$')")

# Pass 2: system calls per delivered packet (counts only).
d0=$(delivered)
traffic $((SECS + 1)) &
tp=$!
sleep 0.5
timeout "$SECS" strace -c -f -q -p "$P1" -p "$P2" -o "$TB_DIR/strace.txt" 2>/dev/null || true
wait "$tp" || true
d1=$(delivered)
PKTS=$((d1 - d0))
calls() { awk -v re="$1" '$NF ~ re {s += $4} END {print s + 0}' "$TB_DIR/strace.txt"; }
TOTAL=$(awk '$NF == "total" {print $4}' "$TB_DIR/strace.txt")
per() { awk -v c="$1" -v p="$PKTS" 'BEGIN {if (p > 0) printf "%.2f", c / p; else print "n/a"}'; }
SYS=$(per "${TOTAL:-0}")
READS=$(per "$(calls '^(read|readv) *$')")
WRITES=$(per "$(calls '^(write|writev) *$')")
WAKES=$(per "$(calls '^(epoll_wait|epoll_pwait|futex) *$')")
URINGS=$(per "$(calls '^io_uring_enter *$')")

echo "# profile: $TRAFFIC vm1 -> vm2, $SUITE, $UPLINK uplink, MTU $MTU, $(basename "$TB_BIN")"
echo "# $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# top of the gateways' own samples (self %, of the gateways' samples):"
head -15 "$TB_DIR/self.txt" | sed 's/^/#   /'
echo "# strace -c (both gateways, $SECS s, $PKTS packets delivered):"
head -14 "$TB_DIR/strace.txt" | sed 's/^/#   /'
echo "PROFILE traffic=$TRAFFIC gw_pct=$GW user_pct=$USER crypto_pct=$CRYPTO tap_read_pct=$TAP_READ" \
    "tap_write_pct=$TAP_WRITE tap_uring_pct=$TAP_URING uplink_send_pct=$UP_SEND uplink_recv_pct=$UP_RECV wait_pct=$WAIT" \
    "softirq_pct=$SOFTIRQ pkts=$PKTS syscalls_per_pkt=$SYS reads_per_pkt=$READS" \
    "writes_per_pkt=$WRITES urings_per_pkt=$URINGS wakeups_per_pkt=$WAKES"
if ((KEEP)); then
    cp -r "$TB_DIR" "/tmp/psp-profile.$$" && echo "# kept: /tmp/psp-profile.$$"
fi
