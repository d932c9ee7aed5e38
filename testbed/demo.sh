#!/usr/bin/env bash
# testbed/demo.sh: two hosts protected by psp-gateway on one Ethernet segment, an eavesdropper
# (eve) capturing everything on it. The README's main command. Run as root.
#
#   vm1 (10.77.0.1, psp0) --psp-gateway-- up0 --+                  +-- up0 --psp-gateway-- (10.77.0.2, psp0) vm2
#                                              [ lan: bridge br0 = hub ]
#                                                       |
#                                                 up0  eve (tcpdump: sees every frame)
#
# Usage: testbed/demo.sh [--suite NAME] [--uplink raw|udp] [--keys session|static] [--normalize [KBPS]] [--lead-ms MS] [--kem MODE] [--quick] [--no-build] [--save-pcap FILE]
#   --suite      PSP suite (default bf-cbc-hmac-sha1, the thesis' FULL category; `none` is its
#                noENC-noHMAC category: then eve must SEE the known text, and does)
#   --uplink     raw: PSP frames (EtherType 0x1982) on up0 (default); udp: PSP in UDP port 5198
#   --keys       session (default): per-session keys from SEP with SMKEX required over two paths
#                (raw: up0 and a second bridge on up1; udp: one path, single-path SEP), each host
#                with an identity made by the script (`keygen --identity`) that signs its group
#                frames and is pinned by the other; static: the legacy pre-shared per-peer keys
#   --normalize  normalize the traffic between the two (seed 003: fixed-size frames at a paced
#                rate, dummies when idle), at KBPS kbit/s (default 20000), with the sessions of
#                --keys: the handshakes and rekeys ride inside the streams. Eve must then see
#                one frame length from each gateway
#   --lead-ms    with --normalize: [normalize] lead_ms = MS on both hosts (0.1..=100, e.g. 0.5;
#                default the gateway's, 4): how far ahead of its slot each outer frame is built
#   --kem        [session] kem = MODE on both hosts (require, prefer or off; default off):
#                ML-KEM-768 beside X25519 in every handshake (docs/SESSIONS.md, "Hybrid
#                post-quantum sessions"); the run then checks that both sessions hold the KEM
#                secret (status `kem`), and RESULT carries `kem=1`
#   --quick      1 s iperf3 runs and a 10 MB file instead of 3 s and 50 MB
#   --no-build   skip `cargo build` and use $TB_BIN (default target/release/psp-gateway)
#   --save-pcap  keep a copy of eve's capture there
#
# It installs what it needs (testbed/install-deps.sh), builds the release binary, builds the
# topology (testbed/lib.sh), starts the gateways, and runs ARP resolution, ping, iperf3 TCP in both
# directions, an ssh login, an scp of a file made of a repeated known text and the same file over
# a cleartext TCP connection (ssh encrypts by itself; the cleartext copy is what makes the
# known-text count meaningful). Control: the known text IS visible on vm2's TAP. It then counts
# what eve saw and ends with one line
#   RESULT ping_ms=… tcp_mbps=… scp_ok=1 eve_frames=N eve_psp_frames=N eve_cleartext_frames=0 eve_known_text_hits=0
# plus, with sessions, `session=two-path handshake_ms=… kem=0|1` (the slower side's handshake;
# kem=1 when both sessions hold the ML-KEM-768 secret), and with
# --normalize `normalized=KBPS eve_unicast_lengths=N lead_ms=MS pacer_skipped=N pacer_late=N`
# (distinct lengths of the PSP frames vm1 sent vm2 from the first of the most common length on,
# 1 when normalized; the lead in use; slots both streams skipped because the driver came more
# than the catch-up bound late; frames both pacer threads got after their slot and sent late)
# (tcp_mbps: vm1 -> vm2; with --suite none or null-hmac-sha1, which do not encrypt,
# eve_known_text_hits is > 0 and must be). Exit 0 only if every check held. Everything is torn down on every exit
# path (also on error and Ctrl-C).
set -uo pipefail

SUITE=bf-cbc-hmac-sha1
UPLINK=raw
KEYS=session
QUICK=0
NORMALIZE=0
KEM=off
LEAD_MS=
SAVE_PCAP=
BUILD=1
usage() {
    sed -n '/^# Usage:/,/^#   --save-pcap/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit "${1:-2}"
}
while (($#)); do
    case $1 in
    --suite) SUITE=${2:?--suite needs a value}; shift 2 ;;
    --uplink) UPLINK=${2:?--uplink needs a value}; shift 2 ;;
    --keys) KEYS=${2:?--keys needs a value}; shift 2 ;;
    --normalize)
        NORMALIZE=20000
        if [[ ${2:-} =~ ^[0-9]+$ ]]; then NORMALIZE=$2; shift; fi
        shift
        ;;
    --lead-ms) LEAD_MS=${2:?--lead-ms needs a value}; shift 2 ;;
    --kem) KEM=${2:?--kem needs a value}; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --no-build) BUILD=0; shift ;;
    --save-pcap) SAVE_PCAP=${2:?--save-pcap needs a file}; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "demo: error: unknown argument '$1'" >&2; usage ;;
    esac
done
[[ $UPLINK == raw || $UPLINK == udp ]] || { echo "demo: error: --uplink must be raw or udp" >&2; exit 2; }
[[ $KEYS == session || $KEYS == static ]] || { echo "demo: error: --keys must be session or static" >&2; exit 2; }
[[ -z $LEAD_MS || ($LEAD_MS =~ ^[0-9]+(\.[0-9]+)?$ && $(awk -v l="$LEAD_MS" 'BEGIN {print (l >= 0.1 && l <= 100)}') == 1) ]] ||
    { echo "demo: error: --lead-ms must be 0.1..100" >&2; exit 2; }
[[ $KEM == off || $KEM == prefer || $KEM == require ]] || { echo "demo: error: --kem must be require, prefer or off" >&2; exit 2; }
[[ $KEM == off || $KEYS == session ]] || { echo "demo: error: --kem needs --keys session (the KEM is part of the session handshake)" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "demo: error: run as root (network namespaces)" >&2; exit 1; }

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

if ((QUICK)); then IPERF_T=1 FILE_MB=10 PINGS=10; else IPERF_T=3 FILE_MB=50 PINGS=20; fi
# Suites without encryption (the section is sent as is): none, null-hmac-sha1.
case $SUITE in none | null-hmac-sha1) ENCRYPTS=0 ;; *) ENCRYPTS=1 ;; esac
TEXT="psp-demo known plaintext: the quick brown fox jumps over the lazy dog 0123456789"
FAILS=()
fail() { FAILS+=("$*"); echo "  FAIL: $*"; }
ok() { echo "  ok: $*"; }
die() { echo "demo: error: $*" >&2; exit 1; }
phase() { printf '\n== %s\n' "$*"; }

phase "dependencies and build"
"$HERE/install-deps.sh" || die "installing dependencies failed"
if ((BUILD)); then
    (cd "$TB_ROOT" && cargo build --release --locked -p psp-gateway) || die "cargo build failed"
fi
[[ -x $TB_BIN ]] || die "no binary at $TB_BIN after the build"

phase "topology (suffix $$), suite $SUITE, uplink $UPLINK, keys $KEYS"
tb_init || die "tb_init failed"
tb_trap
tb_up 2 "$UPLINK" || die "building the topology failed"
tb_keys "$SUITE" || die "key generation failed"
if [[ $KEYS == session ]]; then
    export TB_SESSION=1 TB_IDENTITY=1 TB_SESSION_EXTRA="suites = [\"$SUITE\"]
kem = \"$KEM\""
    if [[ $UPLINK == raw ]]; then
        tb_path2 || die "building the second path failed"
        export TB_PATHS=2 TB_SMKEX=require
    else
        export TB_PATHS=1 TB_SMKEX=off
    fi
    tb_identities || die "keygen --identity failed"
    echo "  identities: vm1 $(cat "$TB_DIR/vm1.pub"), vm2 $(cat "$TB_DIR/vm2.pub")"
fi
if ((NORMALIZE)); then
    export TB_CONFIG_EXTRA="[normalize]
enabled = true
s_goal_kbps = $NORMALIZE${LEAD_MS:+
lead_ms = $LEAD_MS}"
fi
if ! tb_config 1 "$SUITE" "$UPLINK" || ! tb_config 2 "$SUITE" "$UPLINK"; then die "writing the configs failed"; fi
echo "  namespaces: $(ip netns list | awk '{print $1}' | grep -- "-$TB_SFX\$" | tr '\n' ' ')"
echo "  work dir:   $TB_DIR"

phase "gateways"
tb_gw_start 1 || die "the vm1 gateway did not start"
tb_gw_start 2 || die "the vm2 gateway did not start"
MTU=$(tb_x vm1 cat /sys/class/net/psp0/mtu)
echo "  vm1 and vm2 ready; TAP MTU $MTU"

# Eve listens on her bridge port from now on.
EVE_PCAP=$TB_DIR/eve.pcap
tb_tcpdump eve "$TB_DIR/eve-tcpdump.log" -i up0 -nn -s 0 -B 65536 -U -w "$EVE_PCAP" || die "eve's tcpdump did not start"
EVE_PID=$TB_LAST_PID

phase "ARP resolution (inside PSP, group key)"
tb_x vm1 ip neigh flush dev psp0
tb_x vm2 ip neigh flush dev psp0
tb_x vm1 ping -c 1 -W 3 "$(tb_ip 2)" >/dev/null || fail "first ping vm1 -> vm2 (with ARP) got no reply"
NEIGH=$(tb_x vm1 ip neigh show "$(tb_ip 2)" dev psp0)
if [[ $NEIGH == *"lladdr $(tb_mac 2)"* ]]; then ok "vm1 learnt $(tb_ip 2) is at $(tb_mac 2) ($NEIGH)"; else fail "vm1's neighbour entry for $(tb_ip 2): '$NEIGH'"; fi

phase "ping vm1 -> vm2"
PING_OUT=$(tb_x vm1 ping -c "$PINGS" -i 0.05 -q "$(tb_ip 2)")
PING_MS=$(sed -n 's|.*= [0-9.]*/\([0-9.]*\)/.*|\1|p' <<<"$PING_OUT")
if grep -q " 0% packet loss" <<<"$PING_OUT" && [[ -n $PING_MS ]]; then ok "$PINGS pings, avg RTT $PING_MS ms"; else fail "ping: $(tail -2 <<<"$PING_OUT" | tr '\n' ' ')"; PING_MS=${PING_MS:-nan}; fi

phase "iperf3 TCP, ${IPERF_T} s each way"
tb_bg vm2 "$TB_DIR/iperf3-server.log" iperf3 -s -B "$(tb_ip 2)"
iperf() { tb_iperf3 1 "$(tb_ip 2)" "$IPERF_T" "$@"; } # iperf [-R] -> Mbit/s received
if TCP_MBPS=$(iperf); then ok "vm1 -> vm2: $TCP_MBPS Mbit/s"; else fail "iperf3 vm1 -> vm2"; TCP_MBPS=0; fi
if TCP_REV=$(iperf -R); then ok "vm2 -> vm1: $TCP_REV Mbit/s"; else fail "iperf3 vm2 -> vm1"; TCP_REV=0; fi

phase "ssh login and scp of a ${FILE_MB} MB file"
SSHD=$TB_DIR/ssh
tb_sshd 2 || die "starting sshd failed"
SSH_OPTS=("${TB_SSH_OPTS[@]}")
SSH_OK=0
if tb_ssh_wait 1 "$(tb_ip 2)" 2>/dev/null; then SSH_OK=1; fi
if ((SSH_OK)); then ok "ssh root@$(tb_ip 2) true"; else fail "ssh login: $(cat "$SSHD/client.err")"; fi

FILE=$TB_DIR/known.txt
yes "$TEXT" | head -c "$((FILE_MB * 1000 * 1000))" >"$FILE"
SUM=$(sha256sum <"$FILE" | cut -d' ' -f1)
SCP_OK=0
T0=$(date +%s%N)
if tb_x vm1 scp "${SSH_OPTS[@]}" -q "$FILE" "root@$(tb_ip 2):$TB_DIR/recv-scp.txt" 2>"$SSHD/scp.err" &&
    [[ $(sha256sum <"$TB_DIR/recv-scp.txt" | cut -d' ' -f1) == "$SUM" ]]; then
    SCP_OK=1
    ok "scp $FILE_MB MB in $((($(date +%s%N) - T0) / 1000000)) ms, sha256 matches"
else
    fail "scp: $(cat "$SSHD/scp.err")"
fi

phase "the same file over cleartext TCP (control: visible on vm2's TAP, not to eve)"
tb_tcpdump vm2 "$TB_DIR/tap-tcpdump.log" -i psp0 -nn -s 0 -c 2000 -U -w "$TB_DIR/vm2-tap.pcap" tcp port 5001
TAP_PID=$TB_LAST_PID
tb_bg vm2 "$TB_DIR/socat-server.log" socat -u "TCP-LISTEN:5001,bind=$(tb_ip 2),reuseaddr" "CREATE:$TB_DIR/recv-clear.txt"
RECV_PID=$TB_LAST_PID
tb_x vm1 socat -u "OPEN:$FILE" "TCP:$(tb_ip 2):5001,retry=20,interval=0.1" 2>"$TB_DIR/socat-client.err" ||
    fail "cleartext send: $(cat "$TB_DIR/socat-client.err")"
wait "$RECV_PID" 2>/dev/null
if [[ -f $TB_DIR/recv-clear.txt && $(sha256sum <"$TB_DIR/recv-clear.txt" | cut -d' ' -f1) == "$SUM" ]]; then
    ok "cleartext TCP copy, sha256 matches"
else
    fail "cleartext TCP copy did not arrive intact"
fi
sleep 0.3
tb_kill "$TAP_PID"
TAP_HITS=$(grep -a -o -F "$TEXT" "$TB_DIR/vm2-tap.pcap" 2>/dev/null | wc -l)
if ((TAP_HITS > 0)); then ok "control: the known text appears $TAP_HITS times in a capture on vm2's TAP"; else fail "control: known text not found on vm2's TAP (capture broken?)"; fi

phase "what eve saw"
sleep 0.5
tb_kill "$EVE_PID"
EVE_DROPS=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$TB_DIR/eve-tcpdump.log")
count() { tcpdump -r "$EVE_PCAP" --count "$@" 2>/dev/null | awk '/packets/ {print $1}'; }
EVE_FRAMES=$(count)
if [[ $UPLINK == raw ]]; then
    EVE_PSP=$(count 'ether proto 0x1982')
    CLEAR_DEF="frames with an EtherType other than 0x1982"
else
    # UDP mode: the uplink frames are IPv4/UDP; a frame counts as PSP when it is a UDP datagram
    # of port 5198 whose payload is a PSP frame (bytes 12-13 of the payload: 0x1982).
    EVE_PSP=$(count "udp port $TB_PORT and udp[20:2] = 0x1982")
    CLEAR_DEF="frames that are not UDP/$TB_PORT datagrams carrying a PSP frame"
fi
EVE_CLEAR=$((EVE_FRAMES - EVE_PSP))
# Distinct lengths of the PSP frames vm1 sent vm2, from the first frame of the most common
# length on (a normalized stream has one; before it, the first handshake's messages go under the
# group key, one frame each, at their own lengths).
if [[ $UPLINK == raw ]]; then
    tcpdump -r "$EVE_PCAP" -e -nn "ether proto 0x1982 and ether src $(tb_mac 1) and ether dst $(tb_mac 2)" 2>/dev/null |
        sed -n 's/.*length \([0-9]*\):.*/\1/p' >"$TB_DIR/lengths"
else
    tcpdump -r "$EVE_PCAP" -nn "udp port $TB_PORT and src host $(tb_up_ip 1) and dst host $(tb_up_ip 2)" 2>/dev/null |
        sed -n 's/.*length \([0-9]*\)$/\1/p' >"$TB_DIR/lengths"
fi
MAIN_LEN=$(sort "$TB_DIR/lengths" | uniq -c | sort -rn | awk 'NR == 1 {print $2}')
BEFORE=$(awk -v l="$MAIN_LEN" '$1 == l {exit} {n++} END {print n + 0}' "$TB_DIR/lengths")
LENS=$(awk -v l="$MAIN_LEN" '$1 == l {on = 1} on' "$TB_DIR/lengths" | sort -u | wc -l)
EVE_HITS=$(grep -a -o -F "$TEXT" "$EVE_PCAP" | wc -l)
echo "  eve captured $EVE_FRAMES frames ($(du -h "$EVE_PCAP" | cut -f1)), kernel drops: ${EVE_DROPS:-0}"
echo "  PSP frames: $EVE_PSP; cleartext ($CLEAR_DEF): $EVE_CLEAR"
echo "  occurrences of the known text: $EVE_HITS (vm2's TAP: $TAP_HITS)"
echo "  PSP frames vm1 -> vm2: $(wc -l <"$TB_DIR/lengths"), most of them $MAIN_LEN bytes; from the first of those on, $LENS distinct lengths ($BEFORE frames before it)"
if ((NORMALIZE)); then
    ((LENS == 1)) && ok "normalized: every frame vm1 -> vm2 has one length" ||
        fail "normalized, yet eve saw $LENS frame lengths vm1 -> vm2"
fi
((EVE_FRAMES > 0)) || fail "eve captured nothing"
((EVE_CLEAR == 0)) || fail "eve saw $EVE_CLEAR cleartext frames"
if ((ENCRYPTS)); then
    ((EVE_HITS == 0)) || fail "eve saw the known text $EVE_HITS times"
else
    # Measurement mode (the thesis' noENC-noHMAC) or integrity only: nothing is encrypted, so
    # eve must read the text; if she cannot, the count itself is broken.
    echo "  suite $SUITE does not encrypt: eve is expected to read the known text"
    ((EVE_HITS > 0)) || fail "suite $SUITE does not encrypt, yet eve did not see the known text"
fi
echo
echo "  eve's view (tcpdump -e -nn, the first frames):"
tcpdump -r "$EVE_PCAP" -e -nn -c 8 2>/dev/null | grep -v $'^\t' | cut -c1-150 | sed 's/^/    /'
if [[ $UPLINK == raw ]]; then
    echo "  a unicast frame vm1 -> vm2, the first 48 bytes after its Ethernet header:"
    tcpdump -r "$EVE_PCAP" -e -nn -c 1 "ether dst $(tb_mac 2)" 2>/dev/null |
        grep -v '^[0-9]' | head -3 | sed 's/^\t*/      /'
fi
if [[ $UPLINK == raw ]]; then
    # inspect exits 1 only for a frame that fails its check: here every frame is genuine.
    inspect() { # LABEL ARGS... : prints the decode indented; a failure is a FAIL
        local label=$1 out rc
        shift
        echo "  $label"
        out=$("$TB_BIN" inspect "$@" 2>&1)
        rc=$?
        printf '%s\n' "$out" | sed 's/^/    /'
        ((rc == 0)) || fail "psp-gateway inspect ($label) exited $rc"
    }
    echo
    tcpdump -r "$EVE_PCAP" -c 1 -w "$TB_DIR/excerpt-bcast.pcap" 'ether proto 0x1982 and ether broadcast' 2>/dev/null
    # With sessions, a data frame (its key id in the security-number field: flag 0x10), not one
    # of the handshake messages that go under the group key.
    ucast="ether proto 0x1982 and ether dst $(tb_mac 2)"
    [[ $KEYS == session ]] && ucast="$ucast and ether[14] & 0x10 != 0"
    tcpdump -r "$EVE_PCAP" -c 1 -w "$TB_DIR/excerpt-ucast.pcap" "$ucast" 2>/dev/null
    if [[ $KEYS == static ]]; then
        inspect "psp-gateway inspect with the group key (a broadcast frame: ARP inside PSP):" \
            --suite "$SUITE" --key-file "$TB_DIR/group.key" --pcap "$TB_DIR/excerpt-bcast.pcap"
        inspect "psp-gateway inspect with the vm1-vm2 key (a unicast frame vm1 -> vm2):" \
            --suite "$SUITE" --key-file "$TB_DIR/vm1-vm2.key" --pcap "$TB_DIR/excerpt-ucast.pcap"
    else
        # --config: vm1's group key, its peers' pinned identities and its own public key. The
        # broadcast frame is signed by its sender; the unicast one is under a session key,
        # which exists only in the two gateways' memory.
        if [[ $(count 'ether proto 0x1982 and ether broadcast') != 0 ]]; then
            inspect "psp-gateway inspect --config vm1.toml (a broadcast frame: signed ARP inside PSP):" \
                --config "$TB_DIR/vm1.toml" --pcap "$TB_DIR/excerpt-bcast.pcap"
        elif ((NORMALIZE)); then
            # Normalized session peers bring their sessions up by themselves, before any ARP:
            # every broadcast then rides inside the streams, as a group copy.
            echo "  no broadcast frame on the wire: with --normalize, ARP rides inside the streams"
        else
            fail "eve captured no broadcast frame (ARP inside PSP)"
        fi
        inspect "psp-gateway inspect --config vm1.toml (a unicast frame vm1 -> vm2, under a session key):" \
            --config "$TB_DIR/vm1.toml" --pcap "$TB_DIR/excerpt-ucast.pcap"
    fi
else
    echo "  (psp-gateway inspect reads Ethernet PSP frames; in udp mode they are inside UDP: skipped)"
fi
[[ -n $SAVE_PCAP ]] && cp "$EVE_PCAP" "$SAVE_PCAP" && echo "  eve's capture saved to $SAVE_PCAP"

phase "gateway counters"
tb_status 1 | sed 's/^/  vm1: /'
tb_status 2 | sed 's/^/  vm2: /'
SESSION_RESULT=
if [[ $KEYS == session ]]; then
    PATHS=$(tb_status 1 --json | jq -r '.peers[0].session.paths // "none"')
    HS_MS=$(for n in 1 2; do tb_status "$n" --json | jq -r '.peers[0].session.handshake_ms // 0'; done | sort -g | tail -1)
    want=two-path
    [[ $UPLINK == udp ]] && want=single-path
    if [[ $PATHS == "$want" ]]; then ok "session: $PATHS, handshake $HS_MS ms"; else fail "session paths: '$PATHS', want $want"; fi
    KEMS=$(for n in 1 2; do tb_status "$n" --json | jq -r '.peers[0].session.kem // false'; done | sort -u | tr '\n' ' ')
    if [[ $KEMS == "true " ]]; then KEM_OK=1; else KEM_OK=0; fi
    if [[ $KEM == off ]]; then
        ((KEM_OK == 0)) && ok "sessions without the KEM (kem = off)" || fail "kem off, yet a session holds the KEM"
    else
        ((KEM_OK)) && ok "both sessions hold the ML-KEM-768 secret (kem = $KEM)" || fail "kem = $KEM, sessions report kem: $KEMS"
    fi
    SESSION_RESULT=" session=$PATHS handshake_ms=$HS_MS kem=$KEM_OK"
fi
if ((NORMALIZE)); then
    SKIPPED=$(for n in 1 2; do tb_status "$n" --json | jq -r '[.peers[].normalize.pacer_skipped // 0] | add'; done | awk '{s += $1} END {print s + 0}')
    LATE=$(for n in 1 2; do tb_status "$n" --json | jq -r '.pacer_late // 0'; done | awk '{s += $1} END {print s + 0}')
    SESSION_RESULT="$SESSION_RESULT normalized=$NORMALIZE eve_unicast_lengths=$LENS lead_ms=${LEAD_MS:-4} pacer_skipped=$SKIPPED pacer_late=$LATE"
fi
for n in 1 2; do
    d=$(tb_status "$n" --json | jq -r '.drops_total')
    [[ $d == 0 ]] || fail "vm$n counted $d drops (expected none on a clean run)"
done
tb_gw_stop 1 || fail "the vm1 gateway did not exit cleanly on SIGTERM"
tb_gw_stop 2 || fail "the vm2 gateway did not exit cleanly on SIGTERM"

phase "summary"
cat <<EOF
  suite $SUITE, uplink $UPLINK, TAP MTU $MTU
  ping vm1 -> vm2 avg RTT      $PING_MS ms
  iperf3 TCP vm1 -> vm2        $TCP_MBPS Mbit/s
  iperf3 TCP vm2 -> vm1        $TCP_REV Mbit/s
  ssh login / scp ${FILE_MB} MB       $SSH_OK / $SCP_OK
  eve: frames / PSP / clear    $EVE_FRAMES / $EVE_PSP / $EVE_CLEAR
  eve: known-text hits         $EVE_HITS (on vm2's TAP: $TAP_HITS)
EOF
if ((${#FAILS[@]})); then
    echo "  ${#FAILS[@]} check(s) failed:"
    printf '    - %s\n' "${FAILS[@]}"
else
    echo "  every check held"
fi
echo "RESULT ping_ms=$PING_MS tcp_mbps=$TCP_MBPS scp_ok=$SCP_OK eve_frames=$EVE_FRAMES eve_psp_frames=$EVE_PSP eve_cleartext_frames=$EVE_CLEAR eve_known_text_hits=$EVE_HITS$SESSION_RESULT"
((${#FAILS[@]} == 0))
