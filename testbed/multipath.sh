#!/usr/bin/env bash
# testbed/multipath.sh: seed 000's Fig 12 testbed in network namespaces, for psp-multipath
# (`psp-mp`): a client with a trusted "ethernet" and an untrusted "wlan" path to a server, and an
# attacker (eve) on the untrusted link. Root; not in CI (the full run takes a few minutes);
# `--quick` is the CI variant (crates/psp-mp/tests/netns.rs runs it).
#
# Usage:
#   sudo testbed/multipath.sh [--quick] [--only-setup] [--no-build] [--no-write] [--keep]
#                             [--setups N] [--rounds N]
#
#   --quick      unshaped links only, 4 MB transfers, 20 set-ups: a smoke run (CI)
#   --only-setup the set-up time comparison alone (topology, then seed 002 Fig 13's set-ups of
#                every kind), no transfers, captures or attacks; implies --no-write. To rerun it
#                pinned on a quiet machine: build first (cargo build --release -p psp-mp), then
#                `sudo taskset -c 1 chrt -f 50 testbed/multipath.sh --only-setup --no-build`
#   --no-build   use $MP_BIN (default target/release/psp-mp) as it is
#   --no-write   do not touch BENCHMARKS.md and docs/multipath.png
#   --keep       keep the run directory (captures, logs)
#   --setups N   set-ups per kind for the set-up time comparison (default 200)
#   --rounds N   Fig 18 transfers per file size and cipher; the table gives medians (default 3)
#
# Topology (every box a namespace NAME-$SFX; eve routes both links but, except in the
# "both paths" experiment, only looks at the untrusted one):
#
#   mpc (client)                      mpe (eve: router)                     mps (server)
#   eth0  10.71.1.1/24 ---- e0 10.71.1.254 | e1 10.71.11.254 ---- eth0  10.71.11.2/24  trusted
#   wlan0 10.71.2.1/24 ---- w0 10.71.2.254 | w1 10.71.3.254  ---- wlan0 10.71.3.2/24   untrusted
#                           tcpdump -i w0 (the eavesdropper on the untrusted path)
#
# Shaped runs put tbf on both ends' egress: 100 Mbit/s on eth0, 54 Mbit/s on wlan0 (the paper's
# Ethernet and 802.11g). Active attackers (share replacement, both-path man in the middle,
# recording relay) run as `psp-mp proxy` / `psp-mp listen | psp-mp connect` in eve, and the
# client addresses them directly (as if eve redirected the connections: this kernel has no
# nftables tool installed, and redirection changes nothing the protocol sees).
#
# Experiments: Figs 13/14 (the repeated "0123456789" stream as eve sees it, plain vs scrambled
# vs aes128-gcm), Figs 16/17 (a text file's known phrase in eve's capture), and on both captures
# the ciphertext-only analyst (`psp-mp analyze` on the TCP stream tshark reassembles from eve's
# pcap: no key, no known plaintext; bytes recovered / bytes on her path), Fig 18 (throughput of
# 20/40/60/80 MB plain / scrambled / aes128-gcm / chacha20-poly1305 on the shaped links,
# dispersal mode, with the CPU time per stream byte of client and server), the same CPU cost on
# unshaped links, two equal unshaped paths vs one, seed 002 Fig 13 (SMKEX set-up time vs
# one-path X25519, in both modes, both flows, with and without ML-KEM-768, each against the
# one-path baseline of its transport and key exchange, with where the time went), a share
# replaced on the untrusted path (the handshake must fail, also with ML-KEM-768), and the
# honest limits: an attacker on both paths reads the stream (unless the server's long-term key
# is pinned); 65 known plaintext bytes recover one segment of the untrusted path.
#
# Last line:
#   RESULT scrambled_vs_plain=… aes_vs_plain=… chacha_vs_plain=… eve_hits_plain=N
#          eve_hits_scrambled=0 eve_recovered_pct_scrambled=P eve_recovered_pct_aes=P
#          eve_recovered_pct_plain=P eve_recovered_pct_digits_scrambled=P
#          eve_recovered_pct_digits_aes=P cpu_ns_per_byte_plain=… cpu_ns_per_byte_scrambled=…
#          cpu_ns_per_byte_aes=… cpu_ns_per_byte_chacha=… smkex_extra_us=…
#          smkex_faithful_extra_us=… smkex_kem_extra_us=… mptcp_smkex_extra_us=…
#          mptcp_smkex_kem_extra_us=… mptcp_faithful_extra_us=…
#          mitm_one_path_detected=1 kem_mitm_one_path_detected=1 kem_stream_ok=1
#          two_paths_vs_one=… eve_both_paths_hits=N
#          pinned_both_paths_refused=1 known_plaintext_recovered_bytes=N
#          continue_after_path_loss_ok=1
#   (eve_recovered_pct_*: the file transfer, Figs 16/17; *_digits_*: the digit stream, Figs
#   13/14; cpu_ns_per_byte_*: client + server CPU per stream byte, the largest Fig 18 transfer;
#   *_extra_us: median set-up time minus the median of the one-path baseline over the same
#   transport with the same key exchange: smkex_* dispersal, mptcp_* kernel-mptcp, *_kem_* with
#   --kem require against X25519 + ML-KEM-768, faithful the thesis flow; n/a without MPTCP)
#   --only-setup prints only the set-up fields:
#   RESULT smkex_extra_us=… smkex_faithful_extra_us=… smkex_kem_extra_us=…
#          mptcp_smkex_extra_us=… mptcp_smkex_kem_extra_us=… mptcp_faithful_extra_us=…
# Exit 0 when every measurement ran (and the security checks came out as expected), 1
# otherwise, 2 on bad arguments.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
QUICK=0
ONLY_SETUP=0
BUILD=1
WRITE=1
KEEP=0
SETUPS=200
SIZES_MB="20 40 60 80"
ROUNDS=3

usage() { sed -n '/^# Usage:/,/^# Topology/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
bad_usage() {
    echo "multipath.sh: error: $*" >&2
    exit 2
}
say() { echo "== $*" >&2; }

while [ $# -gt 0 ]; do
    case $1 in
    --quick) QUICK=1; shift ;;
    --only-setup) ONLY_SETUP=1; WRITE=0; shift ;;
    --no-build) BUILD=0; shift ;;
    --no-write) WRITE=0; shift ;;
    --keep) KEEP=1; shift ;;
    --setups) SETUPS=${2:-}; shift 2 || bad_usage "--setups needs a value" ;;
    --rounds) ROUNDS=${2:-}; shift 2 || bad_usage "--rounds needs a value" ;;
    -h | --help) usage; exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
    esac
done
[[ $SETUPS =~ ^[1-9][0-9]*$ ]] || bad_usage "--setups must be a positive integer"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || bad_usage "--rounds must be a positive integer"
[ "$(id -u)" -eq 0 ] || bad_usage "run as root (network namespaces)"
if [ "$QUICK" -eq 1 ]; then
    SETUPS=20
    SIZES_MB="4"
    ROUNDS=1
    WRITE=0
fi

for t in ip tc tcpdump tshark perl; do
    command -v "$t" >/dev/null || {
        say "installing test tools (testbed/install-deps.sh)"
        "$HERE/install-deps.sh" >&2
        break
    }
done
MP_BIN=${MP_BIN:-$ROOT/target/release/psp-mp}
if [ "$BUILD" -eq 1 ]; then
    say "building psp-mp (release)"
    (cd "$ROOT" && cargo build --release --locked -p psp-mp --bin psp-mp >&2)
fi
[ -x "$MP_BIN" ] || bad_usage "no $MP_BIN (drop --no-build or set MP_BIN)"

RUN_DIR=$(mktemp -d /tmp/psp-multipath.XXXXXX)
SFX="mp$$"
NS_C="mpc-$SFX" NS_E="mpe-$SFX" NS_S="mps-$SFX"
PIDS=()
on_exit() {
    local rc=$?
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for n in "$NS_C" "$NS_E" "$NS_S"; do ip netns del "$n" 2>/dev/null || true; done
    if [ "$KEEP" -eq 1 ]; then
        echo "multipath.sh: run directory kept: $RUN_DIR" >&2
    else
        rm -rf "$RUN_DIR"
    fi
    return $rc
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Plain words, not functions: a background `$S cmd &` is then cmd itself (ip netns exec execs),
# so `kill $!` reaches it.
C="ip netns exec $NS_C"
E="ip netns exec $NS_E"
S="ip netns exec $NS_S"

# --- topology ---------------------------------------------------------------------------------
for n in "$NS_C" "$NS_E" "$NS_S"; do
    ip netns add "$n"
    ip -n "$n" link set lo up
    ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
done
link() { # NS1 IF1 ADDR1 NS2 IF2 ADDR2
    ip -n "$1" link add "$2" type veth peer name "$5" netns "$4"
    ip -n "$1" addr add "$3" dev "$2"
    ip -n "$4" addr add "$6" dev "$5"
    ip -n "$1" link set "$2" up
    ip -n "$4" link set "$5" up
}
link "$NS_C" eth0 10.71.1.1/24 "$NS_E" e0 10.71.1.254/24
link "$NS_E" e1 10.71.11.254/24 "$NS_S" eth0 10.71.11.2/24
link "$NS_C" wlan0 10.71.2.1/24 "$NS_E" w0 10.71.2.254/24
link "$NS_E" w1 10.71.3.254/24 "$NS_S" wlan0 10.71.3.2/24
ip -n "$NS_C" route add 10.71.11.0/24 via 10.71.1.254
ip -n "$NS_C" route add 10.71.3.0/24 via 10.71.2.254
ip -n "$NS_S" route add 10.71.1.0/24 via 10.71.11.254
ip -n "$NS_S" route add 10.71.2.0/24 via 10.71.3.254
$E sysctl -qw net.ipv4.ip_forward=1
$C ping -c1 -W2 10.71.11.2 >/dev/null
$C ping -c1 -W2 10.71.3.2 >/dev/null

shape() { # on|off
    local ns dev rate
    for x in "$NS_C:eth0:100mbit" "$NS_S:eth0:100mbit" "$NS_C:wlan0:54mbit" "$NS_S:wlan0:54mbit"; do
        IFS=: read -r ns dev rate <<<"$x"
        tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
        if [ "$1" = on ]; then
            # burst: 1 ms at the rate (at least a few full frames); a 50 ms queue.
            tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst 32kbit latency 50ms
        fi
    done
}

SRV_PATHS=(--path trusted,10.71.11.2:7000 --path untrusted,10.71.3.2:7001)
MODE_ARGS=()
# Extra listen arguments of xfer (the client's are its own arguments).
SRV_EXTRA=()
XFER_SRV_PATHS=("${SRV_PATHS[@]}")
CLI_PATHS=(--path trusted,10.71.1.1=10.71.11.2:7000 --path untrusted,10.71.2.1=10.71.3.2:7001)
FAILED=0
# Also a file: failures inside $(...) subshells must count too.
fail() { echo "multipath.sh: FAILED: $*" >&2; FAILED=1; touch "$RUN_DIR/failed"; }

# Waits until something listens on PORT in namespace NS.
wait_port() {
    local i
    for i in $(seq 1 100); do
        ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q . && return 0
        sleep 0.05
    done
    return 1
}

# xfer CIPHER BYTES [client args...]: one transfer client -> server of BYTES of the repeated
# pattern; prints the server's Mbit/s (stream bytes over the time from set-up done to the end).
xfer() {
    local cipher=$1 bytes=$2 log=$RUN_DIR/srv.log
    shift 2
    $S "$MP_BIN" listen "${XFER_SRV_PATHS[@]}" "${MODE_ARGS[@]}" "${SRV_EXTRA[@]}" --cipher "$cipher" \
        --discard -v </dev/null 2>"$log" &
    local spid=$!
    wait_port "$NS_S" 7000 || { fail "server did not listen"; echo 0; return; }
    if ! $C "$MP_BIN" connect "${CLI_PATHS[@]}" "${MODE_ARGS[@]}" --cipher "$cipher" \
        --send-bytes "$bytes" -v "$@" \
        </dev/null >/dev/null 2>"$RUN_DIR/cli.log"; then
        fail "transfer $cipher $bytes: $(tail -n1 "$RUN_DIR/cli.log")"
    fi
    wait "$spid" || fail "server $cipher $bytes: $(tail -n1 "$log")"
    local rate
    rate=$(sed -n 's/.*received \([0-9]*\) bytes in .* s, \([0-9.]*\) Mbit\/s/\1 \2/p' "$log" | tail -n1)
    if [ "${rate%% *}" != "$bytes" ]; then
        fail "transfer $cipher $bytes: server got ${rate%% *} bytes"
        echo 0
        return
    fi
    # The untrusted path's share of this transfer, from the client's per-path counters.
    awk '/path Untrusted/ {u = $6} /path Trusted/ {t = $6}
        END { if (u + t > 0) printf "%.3f\n", u / (u + t) }' "$RUN_DIR/cli.log" >"$RUN_DIR/share.last"
    awk '/path Untrusted/ {print $6}' "$RUN_DIR/cli.log" >"$RUN_DIR/untrusted.last"
    # CPU time of client and server for the stream, in ns per stream byte.
    awk -v n="$bytes" '/psp-mp: cpu / {t += $3} END { if (n > 0) printf "%.2f\n", t * 1000 / n }' \
        "$RUN_DIR/cli.log" "$log" >"$RUN_DIR/cpu.last"
    # Kernel MPTCP mode: the share the kernel gave the subflow from the client's wlan address.
    # (the server's report: bytes received per subflow, its wlan address 10.71.3.2)
    awk '/mptcp subflow/ { b = $10; if ($4 ~ /^10\.71\.3\./) u += b; else t += b }
        END { if (u + t > 0) printf "%.3f\n", u / (u + t) }' "$log" >"$RUN_DIR/mptcp-share.last"
    grep 'mptcp subflow' "$log" | sed 's/^psp-mp: //' >"$RUN_DIR/mptcp-subflows.last" || true
    echo "${rate#* }"
}

# Counts occurrences of a fixed string in a binary file.
hits() { { grep -aoF -- "$1" "$2" || true; } | wc -l; }

# tcp_stream PCAP PORT: the client -> server bytes of the first TCP connection to PORT in PCAP,
# as tshark reassembles them (what eve has: her own capture, nothing else).
tcp_stream() {
    local idx
    idx=$(tshark -r "$1" -Y "tcp.dstport == $2 && tcp.flags.syn == 1 && tcp.flags.ack == 0" \
        -T fields -e tcp.stream 2>/dev/null | awk 'NR == 1')
    [ -n "$idx" ] || return 1
    # Raw follow output: hex lines, the server's indented by a tab; node 0 is the client.
    tshark -r "$1" -q -z "follow,tcp,raw,$idx" 2>/dev/null |
        awk '/^Node 1:/ {on = 1; next} /^====/ {on = 0} on && !/^\t/' |
        perl -ne 'chomp; print pack("H*", $_)'
}

# eve_pct PCAP TRUTH PATH_BYTES: the ciphertext-only attack (`psp-mp analyze`: no key, no known
# plaintext) on eve's capture of the untrusted path; prints the stream bytes it recovered as a
# percentage of PATH_BYTES, the bytes the client put on that path (TRUTH, the stream really
# sent, only scores the guesses).
eve_pct() {
    local raw=$RUN_DIR/eve.stream out got
    if ! tcp_stream "$1" 7001 >"$raw"; then
        fail "no TCP stream to port 7001 in $1"
        echo 0
        return
    fi
    if ! out=$("$MP_BIN" analyze --stream "$raw" --truth "$2" 2>&1); then
        fail "psp-mp analyze $1: $out"
        echo 0
        return
    fi
    echo "$(basename "$1"): $out path_bytes=$3" >>"$RUN_DIR/analyze.log"
    got=$(sed -n 's/.* recovered=\([0-9]*\).*/\1/p' <<<"$out")
    awk -v g="${got:-0}" -v n="$3" 'BEGIN { if (n > 0) printf "%.2f\n", g * 100 / n; else print 0 }'
}

# capture FILE CMD...: runs CMD while eve captures the untrusted link (w0) into FILE.
capture() {
    local file=$1
    shift
    # Immediate mode: without it libpcap hands over packets a ring block at a time, and the
    # block still filling when tcpdump is stopped is lost (the tail of the stream). A 64 MiB
    # buffer: a loopback-speed burst of GRO-merged packets must not be dropped either.
    $E tcpdump -i w0 --immediate-mode -U -s 0 -B 65536 -w "$file" tcp 2>"$file.log" &
    local tpid=$!
    sleep 0.5
    "$@"
    sleep 0.5
    kill -INT "$tpid" 2>/dev/null || true
    wait "$tpid" 2>/dev/null || true
    local got seen
    got=$(sed -n 's/^\([0-9]*\) packets\? captured.*/\1/p' "$file.log")
    seen=$(sed -n 's/^\([0-9]*\) packets\? received by filter.*/\1/p' "$file.log")
    if [ "${got:-0}" != "${seen:-0}" ] || grep -q '^[1-9][0-9]* packets\? dropped by kernel' "$file.log"; then
        say "  warning: eve's capture is incomplete: $(grep packets "$file.log" | xargs)"
    fi
}

median_f() { sort -g "$1" | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
median() { sort -n "$1" | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2))}'; }
pct() { sort -n "$1" | awk -v p="$2" '{a[NR]=$1} END{i=int(NR*p/100+0.999); if(i<1)i=1; print a[i]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a / b; else print "nan" }'; }

CPU=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
say "CPU: $CPU, $(nproc) cores; binary: $MP_BIN"

# --- kernel MPTCP: the server announces its wlan address, the client accepts one more subflow --
MPTCP=1
if ! $C sysctl -qn net.mptcp.enabled 2>/dev/null | grep -q 1; then
    MPTCP=0
    say "this kernel has no MPTCP: kernel-mptcp rows skipped"
else
    for ns in "$NS_C" "$NS_S"; do
        ip netns exec "$ns" sysctl -qw net.mptcp.enabled=1
        ip -n "$ns" mptcp limits set subflows 2 add_addr_accepted 2
    done
    ip -n "$NS_S" mptcp endpoint add 10.71.3.2 dev wlan0 signal
fi

if [ "$ONLY_SETUP" -eq 0 ]; then

# --- Figs 13/14: the iperf-style stream as eve sees it ----------------------------------------
shape off
say "Figs 13/14: repeated 0123456789, eve on the untrusted path"
declare -A EVE_HITS EVE_DIGITS
perl -e 'print "0123456789" x 200000' >"$RUN_DIR/digits.truth"
for cipher in none scramble aes128-gcm; do
    capture "$RUN_DIR/eve-$cipher.pcap" xfer "$cipher" 2000000 >/dev/null
    EVE_HITS[$cipher]=$(hits 0123456789 "$RUN_DIR/eve-$cipher.pcap")
    EVE_DIGITS[$cipher]=$(eve_pct "$RUN_DIR/eve-$cipher.pcap" "$RUN_DIR/digits.truth" \
        "$(cat "$RUN_DIR/untrusted.last")")
    say "  $cipher: ${EVE_HITS[$cipher]} hits of 0123456789; ciphertext-only analyst recovered ${EVE_DIGITS[$cipher]} % of her path"
    # The payload of a few full-size packets as tcpdump -A prints them (one long line each).
    tcpdump -r "$RUN_DIR/eve-$cipher.pcap" -A -n 2>/dev/null | awk 'length > 1000' |
        sed -n '20,24p' | cut -c60-131 >"$RUN_DIR/eve-$cipher.txt" || true
done
[ "${EVE_HITS[none]}" -gt 100 ] || fail "plain: eve should read the pattern (${EVE_HITS[none]} hits)"
[ "${EVE_HITS[scramble]}" -eq 0 ] || fail "scrambled: eve read ${EVE_HITS[scramble]} patterns"
[ "${EVE_HITS[aes128-gcm]}" -eq 0 ] || fail "aes128-gcm: eve read ${EVE_HITS[aes128-gcm]} patterns"

# --- Figs 16/17: a text file with a known phrase ----------------------------------------------
say "Figs 16/17: file transfer, known phrase in eve's capture"
TEXT=$RUN_DIR/file.txt
for i in $(seq 1 20000); do
    echo "line $i: The quick brown fox jumps over the lazy dog; psp-multipath file test."
done >"$TEXT"
declare -A FILE_HITS EVE_FILE
for cipher in none scramble aes128-gcm; do
    run_file() {
        $S "$MP_BIN" listen "${SRV_PATHS[@]}" --cipher "$1" </dev/null >"$RUN_DIR/got.txt" 2>/dev/null &
        local spid=$!
        wait_port "$NS_S" 7001
        $C "$MP_BIN" connect "${CLI_PATHS[@]}" --cipher "$1" -v <"$TEXT" >/dev/null \
            2>"$RUN_DIR/file-cli.log" || fail "file transfer $1"
        wait "$spid" || fail "file server $1"
        cmp -s "$TEXT" "$RUN_DIR/got.txt" || fail "file transfer $1: file differs"
    }
    capture "$RUN_DIR/file-$cipher.pcap" run_file "$cipher"
    FILE_HITS[$cipher]=$(hits "quick brown fox" "$RUN_DIR/file-$cipher.pcap")
    EVE_FILE[$cipher]=$(eve_pct "$RUN_DIR/file-$cipher.pcap" "$TEXT" \
        "$(awk '/path Untrusted/ {print $6}' "$RUN_DIR/file-cli.log")")
    say "  $cipher: ${FILE_HITS[$cipher]} hits of the phrase; ciphertext-only analyst recovered ${EVE_FILE[$cipher]} % of her path"
done
[ "${FILE_HITS[none]}" -gt 100 ] || fail "plain file: eve should see the phrase"
[ "${FILE_HITS[scramble]}" -eq 0 ] || fail "scrambled file: eve saw the phrase ${FILE_HITS[scramble]} times"
[ "${FILE_HITS[aes128-gcm]}" -eq 0 ] || fail "aes128-gcm file: eve saw the phrase ${FILE_HITS[aes128-gcm]} times"
# The analyst: reads plain as it is, scrambled text from the ciphertext alone, and of sealed
# segments only what chance gives (1/256).
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
ge "${EVE_FILE[none]}" 99.9 || fail "plain file: the analyst should read all (${EVE_FILE[none]} %)"
ge "${EVE_FILE[scramble]}" 90 || fail "scrambled file: the analyst recovered only ${EVE_FILE[scramble]} %"
ge 1 "${EVE_FILE[aes128-gcm]}" || fail "aes128-gcm file: the analyst recovered ${EVE_FILE[aes128-gcm]} %"
ge 1 "${EVE_DIGITS[aes128-gcm]}" || fail "aes128-gcm digits: the analyst recovered ${EVE_DIGITS[aes128-gcm]} %"

# --- Fig 18: throughput -----------------------------------------------------------------------
[ "$QUICK" -eq 1 ] && shape off || shape on
say "Fig 18: throughput, $([ "$QUICK" -eq 1 ] && echo unshaped || echo shaped 100/54 Mbit/s)"
declare -A TP
CIPHERS="none scramble aes128-gcm chacha20-poly1305"
# Rounds outermost, ciphers interleaved: a slow minute of the shared host hits all three.
for r in $(seq "$ROUNDS"); do
    for mb in $SIZES_MB; do
        for cipher in $CIPHERS; do
            v=$(xfer "$cipher" $((mb * 1000000)))
            echo "$v" >>"$RUN_DIR/tp.$cipher.$mb"
            cat "$RUN_DIR/cpu.last" >>"$RUN_DIR/cpu.$cipher.$mb"
            [ "$cipher" = scramble ] && cp "$RUN_DIR/share.last" "$RUN_DIR/share.scramble"
            say "  round $r: $mb MB $cipher: $v Mbit/s"
        done
    done
done
declare -A CPU
for mb in $SIZES_MB; do
    for cipher in $CIPHERS; do
        TP[$cipher,$mb]=$(sort -n "$RUN_DIR/tp.$cipher.$mb" | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
        CPU[$cipher,$mb]=$(median_f "$RUN_DIR/cpu.$cipher.$mb")
    done
done
sum() { local t=0 mb; for mb in $SIZES_MB; do t=$(awk -v a="$t" -v b="${TP[$1,$mb]}" 'BEGIN{print a+b}'); done; echo "$t"; }
LAST_MB=${SIZES_MB##* }
SHARE_SHAPED=$(cat "$RUN_DIR/share.scramble")
say "  untrusted share of a scrambled $LAST_MB MB transfer (adaptive, cap 0.5): $SHARE_SHAPED"
SCR_VS_PLAIN=$(ratio "$(sum scramble)" "$(sum none)")
declare -A KTP
MPTCP_SHARE=n/a
if [ "$MPTCP" -eq 1 ]; then
    MODE_ARGS=(--mode kernel-mptcp)
    # The wildcard address: MP_JOINs to the announced wlan address must find the listener.
    XFER_SRV_PATHS=(--path trusted,0.0.0.0:7000 --path untrusted,10.71.3.2:7001)
    for mb in $SIZES_MB; do
        for cipher in none scramble aes128-gcm; do
            KTP[$cipher,$mb]=$(xfer "$cipher" $((mb * 1000000)))
            say "  kernel-mptcp $mb MB $cipher: ${KTP[$cipher,$mb]} Mbit/s"
        done
    done
    MPTCP_SHARE=$(cat "$RUN_DIR/mptcp-share.last")
    cp "$RUN_DIR/mptcp-subflows.last" "$RUN_DIR/mptcp-subflows.txt"
    MODE_ARGS=()
    XFER_SRV_PATHS=("${SRV_PATHS[@]}")
fi
AES_VS_PLAIN=$(ratio "$(sum aes128-gcm)" "$(sum none)")
CHACHA_VS_PLAIN=$(ratio "$(sum chacha20-poly1305)" "$(sum none)")

# --- two equal unshaped paths vs one ----------------------------------------------------------
shape off
say "dispersal: two equal unshaped paths vs one (scramble)"
BIG=$((QUICK ? 20000000 : 200000000))
# Alternating repetitions, medians: the machine is shared, single runs swing by 2x or more.
: >"$RUN_DIR/one.mbps"
: >"$RUN_DIR/two.mbps"
for _ in $(seq 1 $((QUICK ? 1 : 5))); do
    xfer scramble "$BIG" --fixed --share 0 >>"$RUN_DIR/one.mbps"
    xfer scramble "$BIG" >>"$RUN_DIR/two.mbps"
done
ONE=$(median_f "$RUN_DIR/one.mbps")
TWO=$(median_f "$RUN_DIR/two.mbps")
TWO_VS_ONE=$(ratio "$TWO" "$ONE")
say "  one path $ONE Mbit/s, two paths $TWO Mbit/s"
# The same with both links shaped to 100 Mbit/s: where the links, not the 2 vCPUs, are the
# bottleneck.
EQ_ONE=n/a EQ_TWO=n/a EQ_RATIO=n/a
if [ "$QUICK" -eq 0 ]; then
    shape on
    for x in "$NS_C:wlan0" "$NS_S:wlan0"; do
        tc -n "${x%:*}" qdisc change dev "${x#*:}" root tbf rate 100mbit burst 32kbit latency 50ms
    done
    EQ_ONE=$(xfer scramble 100000000 --fixed --share 0)
    EQ_TWO=$(xfer scramble 100000000)
    EQ_RATIO=$(ratio "$EQ_TWO" "$EQ_ONE")
    say "  both shaped to 100 Mbit/s: one path $EQ_ONE, two paths $EQ_TWO Mbit/s"
    shape off
fi

# --- CPU per byte on unshaped links (the quick run's Fig 18 is unshaped already) ----------------
declare -A UCPU UTP
if [ "$QUICK" -eq 0 ]; then
    say "CPU per stream byte, unshaped links ($((BIG / 1000000)) MB per cipher, $ROUNDS rounds)"
    for r in $(seq "$ROUNDS"); do
        for cipher in $CIPHERS; do
            xfer "$cipher" "$BIG" >>"$RUN_DIR/utp.$cipher"
            cat "$RUN_DIR/cpu.last" >>"$RUN_DIR/ucpu.$cipher"
        done
    done
    for cipher in $CIPHERS; do
        UTP[$cipher]=$(median_f "$RUN_DIR/utp.$cipher")
        UCPU[$cipher]=$(median_f "$RUN_DIR/ucpu.$cipher")
        say "  $cipher: ${UTP[$cipher]} Mbit/s, ${UCPU[$cipher]} ns CPU per byte (client + server)"
    done
fi

# --- path loss: the untrusted link goes down mid-transfer ----------------------------------------
#   client wlan0 --X-- (ip link set wlan0 down after 0.5 s); the stream goes on over eth0 under
#   --continue-on-path-failure; the server must get every byte.
say "path loss: the untrusted link goes down mid-transfer (--continue-on-path-failure)"
shape on
CONT_OK=0
LOSS_BYTES=$((QUICK ? 20000000 : 40000000))
$S "$MP_BIN" listen "${SRV_PATHS[@]}" --continue-on-path-failure --path-timeout 2 --discard -v \
    </dev/null 2>"$RUN_DIR/loss-srv.log" &
spid=$!
wait_port "$NS_S" 7000 || fail "path loss: server did not listen"
(sleep 0.5 && ip -n "$NS_C" link set wlan0 down) &
dpid=$!
$C "$MP_BIN" connect "${CLI_PATHS[@]}" --continue-on-path-failure --path-timeout 2 \
    --send-bytes "$LOSS_BYTES" -v </dev/null >/dev/null 2>"$RUN_DIR/loss-cli.log" ||
    fail "path loss: client: $(tail -n1 "$RUN_DIR/loss-cli.log")"
wait "$dpid" || true
wait "$spid" || fail "path loss: server: $(tail -n1 "$RUN_DIR/loss-srv.log")"
got=$(sed -n 's/.*received \([0-9]*\) bytes in .*/\1/p' "$RUN_DIR/loss-srv.log" | tail -n1)
if [ "$got" = "$LOSS_BYTES" ] && grep -q "path Untrusted FAILED" "$RUN_DIR/loss-cli.log"; then
    CONT_OK=1
else
    fail "path loss: server got ${got:-nothing} of $LOSS_BYTES bytes"
fi
say "  $(grep -h "FAILED\|re-sent" "$RUN_DIR/loss-cli.log" | sed 's/^psp-mp: //' | xargs)"
ip -n "$NS_C" link set wlan0 up
ip -n "$NS_C" route replace 10.71.3.0/24 via 10.71.2.254
shape off
$C ping -c1 -W2 10.71.3.2 >/dev/null || fail "path loss: untrusted link not back"

fi # ONLY_SETUP

# --- seed 002 Fig 13: set-up time -------------------------------------------------------------
#   SMKEX set-ups (psp-mp connect --setup-only against listen --count N --discard) of every kind:
#   mode (dispersal: two TCP connections; kernel-mptcp: one MPTCP connection) x flow (compact,
#   the default; thesis, --faithful-handshake) x key exchange (X25519; --kem require: X25519 +
#   ML-KEM-768), and the one-path baselines (psp-mp dh: one exchange over one TCP or MPTCP
#   connection, X25519 or X25519 + ML-KEM-768). Rounds outermost, kinds interleaved: a slow
#   stretch of the shared machine hits every kind alike.
shape off
SU_KINDS="dispersal-compact-x25519 dispersal-compact-kem dispersal-thesis-x25519 dispersal-thesis-kem"
DH_KINDS="dispersal-x25519 dispersal-kem"
if [ "$MPTCP" -eq 1 ]; then
    SU_KINDS+=" kernel-mptcp-compact-x25519 kernel-mptcp-compact-kem kernel-mptcp-thesis-x25519 kernel-mptcp-thesis-kem"
    DH_KINDS+=" kernel-mptcp-x25519 kernel-mptcp-kem"
fi
# Chunks of about 25 set-ups: the shared machine's slow stretches are shorter than a kind's run.
SU_ROUNDS=$((SETUPS >= 50 ? SETUPS / 25 : 1))
SU_PER=$(((SETUPS + SU_ROUNDS - 1) / SU_ROUNDS))
say "set-up time: SMKEX vs one-path X25519 (+ ML-KEM-768), $((SU_PER * SU_ROUNDS)) set-ups per kind in $SU_ROUNDS interleaved rounds"
# smkex_setups KIND N: N SMKEX set-ups of KIND (MODE-FLOW-KEX), one line each appended to
# $RUN_DIR/su.KIND: TOTAL CONNECT HANDSHAKE BINDING FIRST_FLIGHT REPLY KEYS (µs).
smkex_setups() {
    local kind=$1 n=$2 args=() srv=("${SRV_PATHS[@]}")
    case $kind in kernel-mptcp-*)
        args+=(--mode kernel-mptcp)
        # The wildcard address: MP_JOINs to the announced wlan address find the listener.
        srv=(--path trusted,0.0.0.0:7000 --path untrusted,10.71.3.2:7001) ;;
    esac
    case $kind in *-thesis-*) args+=(--faithful-handshake) ;; esac
    case $kind in *-kem) args+=(--kem require) ;; esac
    $S "$MP_BIN" listen "${srv[@]}" "${args[@]}" --count "$n" --discard </dev/null >/dev/null \
        2>"$RUN_DIR/su-srv.log" &
    local spid=$!
    wait_port "$NS_S" 7000 || { fail "set-up server $kind did not listen"; return; }
    $C "$MP_BIN" connect "${CLI_PATHS[@]}" "${args[@]}" --setup-only "$n" >>"$RUN_DIR/su.$kind" \
        2>"$RUN_DIR/su-cli.log" || fail "set-ups $kind: $(tail -n1 "$RUN_DIR/su-cli.log")"
    wait "$spid" || fail "set-up server $kind: $(tail -n1 "$RUN_DIR/su-srv.log")"
}
# dh_setups KIND N: N one-path exchanges of KIND (MODE-KEX), one line each appended to
# $RUN_DIR/dh.KIND.prof: TOTAL CONNECT FIRST_FLIGHT REPLY KEYS (µs).
dh_setups() {
    local kind=$1 n=$2 args=() laddr=10.71.11.2:7002
    case $kind in kernel-mptcp-*) args+=(--mptcp); laddr=0.0.0.0:7002 ;; esac
    case $kind in *-kem) args+=(--kem) ;; esac
    $S "$MP_BIN" dh --listen "$laddr" --count "$n" "${args[@]}" 2>"$RUN_DIR/dh-srv.log" &
    local spid=$!
    wait_port "$NS_S" 7002 || { fail "DH server $kind did not listen"; return; }
    $C "$MP_BIN" dh 10.71.11.2:7002 --count "$n" --profile "${args[@]}" >>"$RUN_DIR/dh.$kind.prof" \
        2>"$RUN_DIR/dh-cli.log" || fail "DH set-ups $kind: $(tail -n1 "$RUN_DIR/dh-cli.log")"
    wait "$spid" || fail "DH server $kind: $(tail -n1 "$RUN_DIR/dh-srv.log")"
}
for k in $SU_KINDS; do : >"$RUN_DIR/su.$k"; done
for k in $DH_KINDS; do : >"$RUN_DIR/dh.$k.prof"; done
for r in $(seq "$SU_ROUNDS"); do
    for k in $SU_KINDS; do smkex_setups "$k" "$SU_PER"; done
    for k in $DH_KINDS; do dh_setups "$k" "$SU_PER"; done
    say "  round $r of $SU_ROUNDS done"
done
# col KIND N: column N of $RUN_DIR/su.KIND, one value a line.
col() { awk -v c="$2" '{print $c}' "$RUN_DIR/su.$1"; }
declare -A SU_MED DH_MED_OF
for k in $SU_KINDS; do
    for c in 1 2 3 4 5 6 7; do
        col "$k" "$c" >"$RUN_DIR/su.$k.c$c"
        SU_MED[$k,$c]=$(median "$RUN_DIR/su.$k.c$c")
    done
done
declare -A DH_PART
for k in $DH_KINDS; do
    awk '{print $1}' "$RUN_DIR/dh.$k.prof" >"$RUN_DIR/dh.$k"
    DH_MED_OF[$k]=$(median "$RUN_DIR/dh.$k")
    for c in 2 3 4 5; do
        awk -v c="$c" '{print $c}' "$RUN_DIR/dh.$k.prof" >"$RUN_DIR/dh.$k.c$c"
        DH_PART[$k,$c]=$(median "$RUN_DIR/dh.$k.c$c")
    done
done
# extra KIND: KIND's median minus the baseline's over the same transport, same key exchange.
extra() {
    local k=$1 mode=${1%%-compact-*}
    mode=${mode%%-thesis-*}
    echo $((${SU_MED[$k,1]} - ${DH_MED_OF[$mode-${k##*-}]}))
}
# The files of the comparison chart and the seed-002 table (dispersal, X25519).
cp "$RUN_DIR/su.dispersal-compact-x25519.c1" "$RUN_DIR/smkex.us"
cp "$RUN_DIR/su.dispersal-thesis-x25519.c1" "$RUN_DIR/faithful.us"
cp "$RUN_DIR/dh.dispersal-x25519" "$RUN_DIR/dh.us"
for c in 2 3 4; do cp "$RUN_DIR/su.dispersal-compact-x25519.c$c" "$RUN_DIR/smkex.c$c"; done
PING_US=$($C ping -c 50 -i 0.01 -q 10.71.11.2 | sed -n 's|.* = [0-9.]*/\([0-9.]*\)/.*|\1|p' |
    awk '{printf "%d", $1 * 1000}')
SMKEX_MED=$(median "$RUN_DIR/smkex.us")
DH_MED=$(median "$RUN_DIR/dh.us")
SMKEX_EXTRA=$(extra dispersal-compact-x25519)
FAITHFUL_EXTRA=$(extra dispersal-thesis-x25519)
SMKEX_KEM_EXTRA=$(extra dispersal-compact-kem)
MPTCP_EXTRA=n/a MPTCP_KEM_EXTRA=n/a MPTCP_FAITHFUL_EXTRA=n/a
if [ "$MPTCP" -eq 1 ]; then
    MPTCP_EXTRA=$(extra kernel-mptcp-compact-x25519)
    MPTCP_KEM_EXTRA=$(extra kernel-mptcp-compact-kem)
    MPTCP_FAITHFUL_EXTRA=$(extra kernel-mptcp-thesis-x25519)
fi
PCTS="10 25 50 75 90 99"
SMKEX_P=$(for p in $PCTS; do pct "$RUN_DIR/smkex.us" "$p"; done | xargs)
DH_P=$(for p in $PCTS; do pct "$RUN_DIR/dh.us" "$p"; done | xargs)
FAITHFUL_P=$(for p in $PCTS; do pct "$RUN_DIR/faithful.us" "$p"; done | xargs)
say "  median SMKEX $SMKEX_MED us (thesis flow $(median "$RUN_DIR/faithful.us")), DH $DH_MED us; kernel-mptcp compact: +$MPTCP_EXTRA us over DH on MPTCP (with ML-KEM-768: +$MPTCP_KEM_EXTRA)"
# The set-up table (markdown), for both reports.
SETUP_TABLE=$RUN_DIR/setup-table.md
{
    echo "| mode | flow | key exchange | p50 | p90 | Δ p50 vs one-path X25519 | Δ p50 vs one-path X25519 + ML-KEM-768 | connect | first flight | reply | keys | binding |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for k in $SU_KINDS; do
        mode=${k%%-compact-*}; mode=${mode%%-thesis-*}
        rest=${k#"$mode"-}; flow=${rest%%-*}; kex=${rest#*-}
        kexname=$([ "$kex" = kem ] && echo "X25519 + ML-KEM-768" || echo X25519)
        echo "| $mode | $flow | $kexname | ${SU_MED[$k,1]} | $(pct "$RUN_DIR/su.$k.c1" 90) | $((${SU_MED[$k,1]} - ${DH_MED_OF[$mode-x25519]})) | $((${SU_MED[$k,1]} - ${DH_MED_OF[$mode-kem]})) | ${SU_MED[$k,2]} | ${SU_MED[$k,5]} | ${SU_MED[$k,6]} | ${SU_MED[$k,7]} | ${SU_MED[$k,4]} |"
    done
    for k in $DH_KINDS; do
        mode=${k%-*}; kex=${k##*-}
        kexname=$([ "$kex" = kem ] && echo "X25519 + ML-KEM-768" || echo X25519)
        echo "| $mode | one-path baseline | $kexname | ${DH_MED_OF[$k]} | $(pct "$RUN_DIR/dh.$k" 90) | $((${DH_MED_OF[$k]} - ${DH_MED_OF[$mode-x25519]})) | $((${DH_MED_OF[$k]} - ${DH_MED_OF[$mode-kem]})) | ${DH_PART[$k,2]} | ${DH_PART[$k,3]} | ${DH_PART[$k,4]} | ${DH_PART[$k,5]} | - |"
    done
} >"$SETUP_TABLE"

if [ "$ONLY_SETUP" -eq 1 ]; then
    {
        echo "Command: \`sudo $(basename "$0") --only-setup\` (affinity $(taskset -pc $$ 2>/dev/null | sed 's/.*: //'), policy $(chrt -p $$ 2>/dev/null | sed 's/.*: //' | xargs)); CPU: $CPU, $(nproc) vCPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%d)."
        echo
        echo "Set-up time in µs, medians over $((SU_PER * SU_ROUNDS)) set-ups per kind (unshaped links, $SU_ROUNDS interleaved rounds); the parts are the client's (connect: TCP or MPTCP connects; first flight: until the hellos and the first flight are written; reply: until the first bytes of the answer; keys: the rest of the answer and the key derivation; binding: until the server's binding tag verified). Ping RTT on the trusted path: $PING_US µs."
        echo
        cat "$SETUP_TABLE"
    } >&2
    echo "RESULT smkex_extra_us=$SMKEX_EXTRA smkex_faithful_extra_us=$FAITHFUL_EXTRA smkex_kem_extra_us=$SMKEX_KEM_EXTRA mptcp_smkex_extra_us=$MPTCP_EXTRA mptcp_smkex_kem_extra_us=$MPTCP_KEM_EXTRA mptcp_faithful_extra_us=$MPTCP_FAITHFUL_EXTRA"
    [ -e "$RUN_DIR/failed" ] && FAILED=1
    exit $FAILED
fi

# --- active attacker on the untrusted path replaces a share -----------------------------------
say "MITM on one path: eve replaces the client's SMKEX share"
$E "$MP_BIN" proxy --listen 10.71.2.254:7101 --to 10.71.3.2:7001 --replace-share &
PIDS+=($!)
$S "$MP_BIN" listen "${SRV_PATHS[@]}" </dev/null >/dev/null 2>"$RUN_DIR/mitm-srv.log" &
spid=$!
wait_port "$NS_S" 7001
wait_port "$NS_E" 7101
MITM_DETECTED=0
if $C "$MP_BIN" connect --path trusted,10.71.1.1=10.71.11.2:7000 \
    --path untrusted,10.71.2.1=10.71.2.254:7101 --send-bytes 1000 </dev/null >/dev/null \
    2>"$RUN_DIR/mitm-cli.log"; then
    fail "the handshake succeeded with a replaced share"
elif grep -q smkex_mismatch "$RUN_DIR/mitm-cli.log"; then
    MITM_DETECTED=1
else
    fail "MITM: unexpected client error: $(cat "$RUN_DIR/mitm-cli.log")"
fi
say "  client: $(cat "$RUN_DIR/mitm-cli.log")"
kill "$spid" 2>/dev/null || true
wait "$spid" 2>/dev/null || true
kill "${PIDS[-1]}" 2>/dev/null || true

say "  ... also with ML-KEM-768 (--kem require): eve replaces the share and the key in the KemShare"
$E "$MP_BIN" proxy --listen 10.71.2.254:7102 --to 10.71.3.2:7001 --replace-share &
PIDS+=($!)
$S "$MP_BIN" listen "${SRV_PATHS[@]}" --kem require </dev/null >/dev/null 2>"$RUN_DIR/kem-mitm-srv.log" &
spid=$!
wait_port "$NS_S" 7001
wait_port "$NS_E" 7102
KEM_MITM_DETECTED=0
if $C "$MP_BIN" connect --kem require --path trusted,10.71.1.1=10.71.11.2:7000 \
    --path untrusted,10.71.2.1=10.71.2.254:7102 --send-bytes 1000 </dev/null >/dev/null \
    2>"$RUN_DIR/kem-mitm-cli.log"; then
    fail "the hybrid handshake succeeded with a replaced KemShare"
elif grep -q smkex_mismatch "$RUN_DIR/kem-mitm-cli.log"; then
    KEM_MITM_DETECTED=1
else
    fail "KEM MITM: unexpected client error: $(cat "$RUN_DIR/kem-mitm-cli.log")"
fi
say "  client: $(cat "$RUN_DIR/kem-mitm-cli.log")"
kill "$spid" 2>/dev/null || true
wait "$spid" 2>/dev/null || true
kill "${PIDS[-1]}" 2>/dev/null || true

# --- the hybrid key exchange: a stream with --kem require on both sides, each mode ------------
say "ML-KEM-768: 1 MB with --kem require on both sides, each mode"
KEM_STREAM_OK=1
for mode in dispersal $([ "$MPTCP" -eq 1 ] && echo kernel-mptcp); do
    if [ "$mode" = kernel-mptcp ]; then
        MODE_ARGS=(--mode kernel-mptcp)
        XFER_SRV_PATHS=(--path trusted,0.0.0.0:7000 --path untrusted,10.71.3.2:7001)
    fi
    SRV_EXTRA=(--kem require)
    v=$(xfer aes128-gcm 1000000 --kem require)
    for log in "$RUN_DIR/cli.log" "$RUN_DIR/srv.log"; do
        if ! grep -q "kem on (x25519 + ml-kem-768)" "$log"; then
            KEM_STREAM_OK=0
            fail "kem $mode: no 'kem on' in $(basename "$log"): $(grep connected "$log")"
        fi
    done
    say "  $mode: $v Mbit/s; $(grep -h 'connected' "$RUN_DIR/cli.log" | sed 's/^psp-mp: //')"
    SRV_EXTRA=()
    MODE_ARGS=()
    XFER_SRV_PATHS=("${SRV_PATHS[@]}")
done

# --- the honest limits ------------------------------------------------------------------------
say "limit 1: an active attacker on both paths (no long-term keys) reads the stream"
$S "$MP_BIN" listen "${SRV_PATHS[@]}" --discard </dev/null 2>/dev/null &
spid=$!
wait_port "$NS_S" 7001
$E sh -c "'$MP_BIN' listen --path trusted,10.71.1.254:7100 --path untrusted,10.71.2.254:7101 \
    </dev/null | tee '$RUN_DIR/eve-both.bin' | '$MP_BIN' connect \
    --path trusted,10.71.11.2:7000 --path untrusted,10.71.3.2:7001 >/dev/null" &
epid=$!
wait_port "$NS_E" 7101
$C "$MP_BIN" connect --path trusted,10.71.1.1=10.71.1.254:7100 \
    --path untrusted,10.71.2.1=10.71.2.254:7101 --send-bytes 1000000 </dev/null >/dev/null ||
    fail "both-path MITM: client"
wait "$epid" || fail "both-path MITM: eve's relay"
wait "$spid" || fail "both-path MITM: server"
EVE_BOTH=$(hits 0123456789 "$RUN_DIR/eve-both.bin")
[ "$EVE_BOTH" -gt 1000 ] || fail "both-path attacker should read the stream ($EVE_BOTH hits)"

say "  ... unless the server's long-term key is pinned (seed 002 §10)"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$RUN_DIR/server.key"
chmod 600 "$RUN_DIR/server.key"
PIN=$("$MP_BIN" pubkey --key-file "$RUN_DIR/server.key")
$S "$MP_BIN" listen "${SRV_PATHS[@]}" --key-file "$RUN_DIR/server.key" --discard </dev/null 2>/dev/null &
spid=$!
wait_port "$NS_S" 7001
$E sh -c "'$MP_BIN' listen --path trusted,10.71.1.254:7100 --path untrusted,10.71.2.254:7101 \
    </dev/null 2>/dev/null | '$MP_BIN' connect --pin $PIN \
    --path trusted,10.71.11.2:7000 --path untrusted,10.71.3.2:7001 >/dev/null 2>&1" &
epid=$!
wait_port "$NS_E" 7101
PINNED_REFUSED=0
if $C "$MP_BIN" connect --pin "$PIN" --path trusted,10.71.1.1=10.71.1.254:7100 \
    --path untrusted,10.71.2.1=10.71.2.254:7101 --send-bytes 1000 </dev/null >/dev/null \
    2>"$RUN_DIR/pinned-cli.log"; then
    fail "pinned: the client connected through the attacker"
elif grep -q identity_mismatch "$RUN_DIR/pinned-cli.log"; then
    PINNED_REFUSED=1
else
    fail "pinned: unexpected client error: $(cat "$RUN_DIR/pinned-cli.log")"
fi
say "  client: $(cat "$RUN_DIR/pinned-cli.log")"
kill "$spid" "$epid" 2>/dev/null || true
wait "$spid" "$epid" 2>/dev/null || true

say "limit 2: 65 known plaintext bytes recover a segment of the untrusted path"
head -c 2000000 /dev/urandom >"$RUN_DIR/secret.bin"
$E "$MP_BIN" proxy --listen 10.71.2.254:7101 --to 10.71.3.2:7001 --record "$RUN_DIR/rec.bin" &
ppid=$!
PIDS+=($ppid)
$S "$MP_BIN" listen "${SRV_PATHS[@]}" --cipher scramble --discard </dev/null 2>/dev/null &
spid=$!
wait_port "$NS_S" 7001
wait_port "$NS_E" 7101
$C "$MP_BIN" connect --cipher scramble --path trusted,10.71.1.1=10.71.11.2:7000 \
    --path untrusted,10.71.2.1=10.71.2.254:7101 <"$RUN_DIR/secret.bin" >/dev/null ||
    fail "known-plaintext transfer"
wait "$spid" || fail "known-plaintext server"
sleep 0.3
kill "$ppid" 2>/dev/null || true
KP_BYTES=0
if "$MP_BIN" recover --capture "$RUN_DIR/rec.bin" --known-file "$RUN_DIR/secret.bin" \
    >"$RUN_DIR/recovered.bin" 2>"$RUN_DIR/recover.info"; then
    read -r KP_OFF KP_LEN <"$RUN_DIR/recover.info"
    # (head closes the pipe early: no pipefail verdict on it)
    tail -c +$((KP_OFF + 1)) "$RUN_DIR/secret.bin" | head -c "$KP_LEN" >"$RUN_DIR/expected.bin" || true
    if cmp -s "$RUN_DIR/expected.bin" "$RUN_DIR/recovered.bin"; then
        KP_BYTES=$KP_LEN
    else
        fail "known-plaintext recovery gave wrong bytes"
    fi
else
    fail "known-plaintext recovery: $(cat "$RUN_DIR/recover.info")"
fi
say "  recovered $KP_BYTES bytes (one segment at offset ${KP_OFF:-?}) from 65 known bytes"

# --- report -----------------------------------------------------------------------------------
REPORT=$RUN_DIR/report.md
{
    echo "Command: \`sudo testbed/multipath.sh$([ "$QUICK" -eq 1 ] && echo " --quick")\`; CPU: $CPU, $(nproc) vCPUs; $(date -u +%Y-%m-%d)."
    echo
    echo "Figs 13/14, the untrusted link as eve captures it (\`tcpdump -A\`, a few payload lines):"
    echo
    for cipher in none scramble; do
        echo "- $cipher: ${EVE_HITS[$cipher]} occurrences of \`0123456789\` in 2 MB"
        echo '```text'
        cat "$RUN_DIR/eve-$cipher.txt"
        echo '```'
    done
    echo
    echo "Figs 16/17, a 1.5 MB text file: \`quick brown fox\` (20000 times in the file) in eve's capture: plain ${FILE_HITS[none]}, scrambled ${FILE_HITS[scramble]}, aes128-gcm ${FILE_HITS[aes128-gcm]} (the papers' measure)."
    echo
    echo "The ciphertext-only analyst on the same captures (\`psp-mp analyze\` on the TCP stream tshark reassembles from eve's pcap of the untrusted path: no key, no known plaintext; stream bytes recovered / stream bytes the client put on that path):"
    echo
    echo "| eve's capture | plain | scrambled | aes128-gcm |"
    echo "|---|---|---|---|"
    echo "| Figs 16/17, the text file | ${EVE_FILE[none]} % | ${EVE_FILE[scramble]} % | ${EVE_FILE[aes128-gcm]} % |"
    echo "| Figs 13/14, the digit stream | ${EVE_DIGITS[none]} % | ${EVE_DIGITS[scramble]} % | ${EVE_DIGITS[aes128-gcm]} % |"
    echo
    echo '```text'
    cat "$RUN_DIR/analyze.log"
    echo '```'
    echo
    echo "Fig 18, throughput in Mbit/s ($([ "$QUICK" -eq 1 ] && echo "unshaped" || echo "trusted 100 Mbit/s + untrusted 54 Mbit/s, tbf"), dispersal mode, adaptive share <= 50 %; medians of $ROUNDS interleaved rounds):"
    echo
    echo "| file | plain | scrambled | aes128-gcm | chacha20-poly1305 | scrambled/plain | aes/plain | chacha/plain |"
    echo "|---|---|---|---|---|---|---|---|"
    for mb in $SIZES_MB; do
        echo "| $mb MB | ${TP[none,$mb]} | ${TP[scramble,$mb]} | ${TP[aes128-gcm,$mb]} | ${TP[chacha20-poly1305,$mb]} | $(ratio "${TP[scramble,$mb]}" "${TP[none,$mb]}") | $(ratio "${TP[aes128-gcm,$mb]}" "${TP[none,$mb]}") | $(ratio "${TP[chacha20-poly1305,$mb]}" "${TP[none,$mb]}") |"
    done
    if [ "$MPTCP" -eq 1 ]; then
        for mb in $SIZES_MB; do
            echo "| $mb MB, kernel MPTCP | ${KTP[none,$mb]} | ${KTP[scramble,$mb]} | ${KTP[aes128-gcm,$mb]} | - | $(ratio "${KTP[scramble,$mb]}" "${KTP[none,$mb]}") | $(ratio "${KTP[aes128-gcm,$mb]}" "${KTP[none,$mb]}") | - |"
        done
    fi
    echo "| paper (seed 000 Fig 18) | 90 | 75 | 2 | - | 0.83 | 0.02 | - |"
    echo
    echo "CPU time per stream byte, client + server (ns/B, \`/proc/self/task/*/schedstat\` of both psp-mp processes over the stream; medians of the same runs):"
    echo
    echo "| links | plain | scrambled | aes128-gcm | chacha20-poly1305 |"
    echo "|---|---|---|---|---|"
    for mb in $SIZES_MB; do
        echo "| $([ "$QUICK" -eq 1 ] && echo unshaped || echo shaped), $mb MB | ${CPU[none,$mb]} | ${CPU[scramble,$mb]} | ${CPU[aes128-gcm,$mb]} | ${CPU[chacha20-poly1305,$mb]} |"
    done
    if [ "$QUICK" -eq 0 ]; then
        echo "| unshaped, $((BIG / 1000000)) MB (Mbit/s: ${UTP[none]} / ${UTP[scramble]} / ${UTP[aes128-gcm]} / ${UTP[chacha20-poly1305]}) | ${UCPU[none]} | ${UCPU[scramble]} | ${UCPU[aes128-gcm]} | ${UCPU[chacha20-poly1305]} |"
    fi
    echo
    echo "Kernel MPTCP mode: the kernel put $MPTCP_SHARE of the last transfer on the wlan subflow (its choice; this layer cannot pin data). The server's subflow report (bytes received per subflow):"
    echo
    echo '```text'
    cat "$RUN_DIR/mptcp-subflows.txt" 2>/dev/null || true
    echo '```'
    echo
    echo "The untrusted path carried $SHARE_SHAPED of a scrambled $LAST_MB MB transfer (adaptive policy, cap 0.5; the last round)."
    echo
    echo "Two equal unshaped paths vs one (scrambled, $((BIG / 1000000)) MB, adaptive share; one path = \`--fixed --share 0\`; medians of $(wc -l <"$RUN_DIR/one.mbps") alternating runs: one path $(xargs <"$RUN_DIR/one.mbps"), two paths $(xargs <"$RUN_DIR/two.mbps")): one path $ONE Mbit/s, two paths $TWO Mbit/s, ratio $TWO_VS_ONE. Unshaped, the 2 vCPUs (client, eve forwarding both links, server) are the bottleneck, not the links. Both links shaped to 100 Mbit/s (100 MB): one path $EQ_ONE, two paths $EQ_TWO Mbit/s, ratio $EQ_RATIO."
    echo
    echo "Set-up time in µs over $SETUPS set-ups each (unshaped links), percentiles $PCTS:"
    echo
    echo "| kind | p10 | p25 | p50 | p75 | p90 | p99 |"
    echo "|---|---|---|---|---|---|---|"
    echo "| SMKEX, two paths, one round trip (default: TCP connects + hellos + SEP offer with SMKEX + binding) | ${SMKEX_P// / | } |"
    echo "| SMKEX, two paths, thesis flow (\`--faithful-handshake\`: SEP Request/Accept, SMKEX, Confirm/ConfirmAck) | ${FAITHFUL_P// / | } |"
    echo "| X25519, one path (TCP connect + one exchange) | ${DH_P// / | } |"
    echo
    echo "SMKEX set-up profile (medians, µs): TCP connects of both paths $(median "$RUN_DIR/smkex.c2"), hellos + SEP/SMKEX $(median "$RUN_DIR/smkex.c3"), binding tags $(median "$RUN_DIR/smkex.c4"); the baseline's total $DH_MED."
    echo
    echo "Every mode, flow and key exchange against the one-path baseline of the same transport (medians in µs over $((SU_PER * SU_ROUNDS)) set-ups each, $SU_ROUNDS interleaved rounds; the parts are the client's: connect, first flight written, first bytes of the answer, keys, binding):"
    echo
    cat "$SETUP_TABLE"
    echo
    echo "SMKEX extra at the median: $SMKEX_EXTRA µs (paper, seed 002 Fig 13: about +50 µs). Ping RTT client-server on the trusted path: $PING_US µs (mean of 50). The default set-up is 2 round trips, like the baseline (TCP connect; then the SEP offer with the share and the nonce, answered by Accept, the share, the hash and the responder's binding tag); the thesis flow is 4 (TCP connect, SEP Request/Accept, shares and nonces, Confirm/ConfirmAck): extra at the median $FAITHFUL_EXTRA µs."
    echo
    echo "Attacks: a share replaced on the untrusted path detected: $MITM_DETECTED (client error: \`$(cat "$RUN_DIR/mitm-cli.log")\`), with ML-KEM-768 (share and key replaced): $KEM_MITM_DETECTED; an active attacker on both paths read $EVE_BOTH of 100000 patterns, and was refused when the client pinned the server's long-term key: $PINNED_REFUSED (\`$(cat "$RUN_DIR/pinned-cli.log")\`); 65 known plaintext bytes recovered $KP_BYTES bytes (one whole segment) of the untrusted path without the key."
    echo
    echo "Path loss (\`--continue-on-path-failure --path-timeout 2\`, links shaped, $LOSS_BYTES bytes, client's wlan0 set down 0.5 s into the transfer): all bytes arrived: $CONT_OK; $(grep -h "FAILED\|re-sent" "$RUN_DIR/loss-cli.log" | sed 's/^psp-mp: //' | xargs)."
} >"$REPORT"
cat "$REPORT" >&2

if [ "$WRITE" -eq 1 ]; then
    say "writing BENCHMARKS.md (multipath section) and docs/multipath.png"
    B=$ROOT/BENCHMARKS.md
    BEGIN='<!-- multipath:begin -->'
    END='<!-- multipath:end -->'
    if ! grep -qF "$BEGIN" "$B"; then
        printf '\n## psp-multipath (testbed/multipath.sh)\n\n%s\n%s\n' "$BEGIN" "$END" >>"$B"
    fi
    awk -v b="$BEGIN" -v e="$END" -v f="$REPORT" '
        $0 == b { print; while ((getline l < f) > 0) print l; skip = 1; next }
        $0 == e { skip = 0 }
        !skip { print }' "$B" >"$B.tmp" && mv "$B.tmp" "$B"
    if command -v gnuplot >/dev/null; then
        for mb in $SIZES_MB; do
            echo "$mb ${TP[none,$mb]} ${TP[scramble,$mb]} ${TP[aes128-gcm,$mb]} ${TP[chacha20-poly1305,$mb]}"
        done >"$RUN_DIR/tp.dat"
        sort -n "$RUN_DIR/smkex.us" | awk '{print $1, NR}' >"$RUN_DIR/smkex.cdf"
        sort -n "$RUN_DIR/dh.us" | awk '{print $1, NR}' >"$RUN_DIR/dh.cdf"
        sort -n "$RUN_DIR/faithful.us" | awk '{print $1, NR}' >"$RUN_DIR/faithful.cdf"
        gnuplot <<EOF || fail "gnuplot"
set terminal pngcairo size 1100,420 font "DejaVu Sans,10"
set output "$ROOT/docs/multipath.png"
set multiplot layout 1,2
set title "Fig 18: file transfer throughput (shaped 100 + 54 Mbit/s)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "Mbit/s"
set xlabel "file size (MB)"
set yrange [0:200]
set key top left horizontal
plot "$RUN_DIR/tp.dat" using 2:xtic(1) title "plain", "" using 3 title "scrambled", "" using 4 title "aes128-gcm", "" using 5 title "chacha20-poly1305"
set title "seed 002 Fig 13: connection set-up time, CDF over $SETUPS"
set style data lines
set xlabel "µs"
set ylabel "set-ups"
set xrange [0:3000]
set key bottom right
plot "$RUN_DIR/smkex.cdf" using 1:2 title "SMKEX, two paths, one round trip" lw 2, "$RUN_DIR/faithful.cdf" using 1:2 title "SMKEX, thesis flow" lw 2, "$RUN_DIR/dh.cdf" using 1:2 title "X25519, one path" lw 2
unset multiplot
EOF
    else
        say "gnuplot missing (testbed/install-deps.sh installs it): no chart"
    fi
fi

echo "RESULT scrambled_vs_plain=$SCR_VS_PLAIN aes_vs_plain=$AES_VS_PLAIN chacha_vs_plain=$CHACHA_VS_PLAIN eve_hits_plain=${EVE_HITS[none]} eve_hits_scrambled=${EVE_HITS[scramble]} eve_recovered_pct_scrambled=${EVE_FILE[scramble]} eve_recovered_pct_aes=${EVE_FILE[aes128-gcm]} eve_recovered_pct_plain=${EVE_FILE[none]} eve_recovered_pct_digits_scrambled=${EVE_DIGITS[scramble]} eve_recovered_pct_digits_aes=${EVE_DIGITS[aes128-gcm]} cpu_ns_per_byte_plain=${CPU[none,$LAST_MB]} cpu_ns_per_byte_scrambled=${CPU[scramble,$LAST_MB]} cpu_ns_per_byte_aes=${CPU[aes128-gcm,$LAST_MB]} cpu_ns_per_byte_chacha=${CPU[chacha20-poly1305,$LAST_MB]} smkex_extra_us=$SMKEX_EXTRA smkex_faithful_extra_us=$FAITHFUL_EXTRA smkex_kem_extra_us=$SMKEX_KEM_EXTRA mptcp_smkex_extra_us=$MPTCP_EXTRA mptcp_smkex_kem_extra_us=$MPTCP_KEM_EXTRA mptcp_faithful_extra_us=$MPTCP_FAITHFUL_EXTRA mitm_one_path_detected=$MITM_DETECTED kem_mitm_one_path_detected=$KEM_MITM_DETECTED kem_stream_ok=$KEM_STREAM_OK two_paths_vs_one=$TWO_VS_ONE eve_both_paths_hits=$EVE_BOTH pinned_both_paths_refused=$PINNED_REFUSED known_plaintext_recovered_bytes=$KP_BYTES continue_after_path_loss_ok=$CONT_OK"
[ -e "$RUN_DIR/failed" ] && FAILED=1
exit $FAILED
