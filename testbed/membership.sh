#!/usr/bin/env bash
# testbed/membership.sh: membership by certificate (issue 27, docs/MEMBERSHIP.md). Six hosts on
# one segment, two paths each (bridges br0 and br1, hubs), every gateway configured with [pki]
# and no [[peer]] block; eve captures path 1. Root.
#
#   1. A CA (`psp-gateway ca init`, its key stays in the CA directory), one identity and one
#      certificate per host (`ca sign`).
#   2. vm1..vm5 start; every host pings every other (ARP, then a session on the certificates).
#   3. vm6 joins: its files are made, it starts; no other host's file is touched (checksums
#      before and after), and it pings every other host.
#   4. vm3 is revoked (`ca revoke`) on vm1 only: vm1's config names the new list, SIGHUP. The
#      time until every other host's status shows the list is the spread.
#   5. vm3 keeps every file it had and its gateway running: it pings every host, resolves their
#      addresses, replays every frame captured on path 1 before its revocation, restarts (new
#      handshakes and announcements with its old certificate); meanwhile the others ping each
#      other every 100 ms. Then: sessions with vm3 up anywhere, broadcasts sent after the
#      revocation that vm3's keys open (`psp-gateway inspect --config vm3.toml` on eve's
#      capture), the others' ping loss.
#
# Usage: testbed/membership.sh [--quick] [--no-build]
# Last line: RESULT hosts=6 join_edits_on_others=0 revocation_spread_s=… rotations=…
#   rotation_ping_loss_pct=… revoked_broadcasts_read=… revoked_sessions=… others_ping_loss_pct=…
# rotations: broadcast keys vm1 (the key server: priority 128 everywhere, lowest MAC) made while
# it sent broadcast pings every 100 ms (rotate_s = 5); rotation_ping_loss_pct: the replies
# missing (each of the five others answers each). revoked_broadcasts_read counts what the keys
# in vm3's files open (the group key); the broadcast key it held in memory before the
# revocation opens nothing sent 2 s after the key server put the list in force (psp-core test
# `a_revoked_member_gets_no_new_key_and_cannot_open_what_follows`).
set -uo pipefail

QUICK=0
BUILD=1
while (($#)); do
    case $1 in
    --quick) QUICK=1; shift ;;
    --no-build) BUILD=0; shift ;;
    *) echo "membership: error: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[[ $(id -u) -eq 0 ]] || { echo "membership: error: run as root" >&2; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
die() { echo "membership: error: $*" >&2; exit 1; }

if ((QUICK)); then ATTACK_S=5 ROTATIONS=3; else ATTACK_S=20 ROTATIONS=10; fi
ROTATE_S=5
NHOSTS=6

"$HERE/install-deps.sh" >/dev/null || die "installing dependencies failed"
if ((BUILD)); then
    (cd "$HERE/.." && cargo build --release -q -p psp-gateway) || die "build failed"
fi
[[ -x $TB_BIN ]] || die "no psp-gateway at $TB_BIN"

tb_init || die "init"
tb_trap

# --- topology: six hosts and eve on br0 (path 1) and br1 (path 2) ---------------------------
seq -s ' ' 1 "$NHOSTS" >"$TB_DIR/hosts"
echo raw >"$TB_DIR/uplink"
tb__netns lan || die "lan"
LAN=$(tb_ns lan)
ip -n "$LAN" link add br0 type bridge ageing_time 0 stp_state 0 mcast_snooping 0 || die "br0"
ip -n "$LAN" link set br0 up
for i in $(seq 1 "$NHOSTS"); do
    tb__netns "vm$i" || die "netns vm$i"
    tb__port "vm$i" "$(tb_up_mac "$i")" || die "port vm$i"
    ip netns exec "$(tb_ns "vm$i")" sysctl -qw net.ipv6.conf.up0.disable_ipv6=1 >/dev/null
done
tb__netns eve || die "netns eve"
tb__port eve "$(tb_up_mac eve)" || die "port eve"
ip -n "$(tb_ns eve)" link set up0 promisc on
tb_path2 || die "path 2"

# --- the CA, identities, certificates --------------------------------------------------------
CA=$TB_DIR/ca
"$TB_BIN" ca init --dir "$CA" --name psp-testbed-ca >/dev/null || die "ca init"
(umask 077 && "$TB_BIN" keygen --suite aes128-gcm >"$TB_DIR/group.key") || die "group key"
make_host() {
    local i=$1 pub
    pub=$("$TB_BIN" keygen --identity "$TB_DIR/vm$i.id") || return 1
    "$TB_BIN" ca sign --dir "$CA" --name "vm$i" --identity "$pub" --mac "$(tb_mac "$i")" \
        --addr "$(tb_ip "$i")/24" --out "$TB_DIR/vm$i.crt" >/dev/null || return 1
    cp "$CA/ca.crt" "$TB_DIR/ca.crt"
    cat >"$TB_DIR/vm$i.toml" <<EOF
# vm$i: [pki] and no [[peer]] block (testbed/membership.sh)
[interface]
name = "psp0"
mac = "$(tb_mac "$i")"
addresses = ["$(tb_ip "$i")/24"]

[[uplink]]
kind = "raw"
interface = "up0"

[[uplink]]
kind = "raw"
interface = "up1"

[session]
smkex = "require"
identity_file = "vm$i.id"

[pki]
ca = "ca.crt"
certificate = "vm$i.crt"
rotate_s = $ROTATE_S

[daemon]
status_socket = "$(tb_sock "$i")"
state_directory = "$TB_DIR/vm$i.state"

[defaults]
suite = "aes128-gcm"

[group]
key_file = "group.key"
EOF
}
for i in 1 2 3 4 5; do make_host "$i" || die "host vm$i"; done

tb_tcpdump eve "$TB_DIR/eve.log" -i up0 -n -U -w "$TB_DIR/eve.pcap" ether proto 0x1982 ||
    die "tcpdump"
for i in 1 2 3 4 5; do tb_gw_start "$i" || die "gateway vm$i"; done

# ping_all HOSTS...: every host pings every other once (3 tries); the pairs that failed.
ping_all() {
    local i j failed=0
    for i in "$@"; do
        for j in "$@"; do
            [[ $i == "$j" ]] && continue
            tb_x "vm$i" ping -c 1 -W 3 "$(tb_ip "$j")" >/dev/null 2>&1 ||
                tb_x "vm$i" ping -c 2 -W 3 "$(tb_ip "$j")" >/dev/null 2>&1 ||
                { echo "membership: vm$i cannot reach vm$j" >&2; failed=$((failed + 1)); }
        done
    done
    echo "$failed"
}
failed=$(ping_all 1 2 3 4 5)
[[ $failed == 0 ]] || die "$failed pairs of vm1..vm5 did not reach each other"
echo "membership: vm1..vm5 reach each other on their certificates alone"

# --- vm6 joins ---------------------------------------------------------------------------------
sums() { (cd "$TB_DIR" && sha256sum vm[1-5].toml ca.crt group.key vm[1-5].crt | sha256sum); }
before=$(sums)
make_host 6 || die "host vm6"
tb_gw_start 6 || die "gateway vm6"
failed=$(ping_all 1 2 3 4 5 6)
[[ $failed == 0 ]] || die "$failed pairs did not reach each other after vm6 joined"
after=$(sums)
edits=0
[[ $before == "$after" ]] || edits=1
echo "membership: vm6 joined; files of the others changed: $edits"

# --- broadcast keys rotate: broadcast pings from vm1 across ROTATIONS rotations --------------
for i in $(seq 1 "$NHOSTS"); do
    tb_x "vm$i" sysctl -qw net.ipv4.icmp_echo_ignore_broadcasts=0 >/dev/null
done
jq_m() { tb_status "$1" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['membership'].get('$2', 0))"; }
rot0=$(jq_m 1 rotations)
secs=$((ROTATIONS * ROTATE_S + 2))
tb_x vm1 ping -b -i 0.1 -c $((secs * 10)) -W 1 "10.77.0.255" >"$TB_DIR/bping.log" 2>&1
rot1=$(jq_m 1 rotations)
rotations=$((rot1 - rot0))
rotation_loss=$(python3 - "$TB_DIR/bping.log" "$NHOSTS" <<'EOF'
import re, sys
# Each of the other hosts answers each broadcast ping once (vm1's own answer is not counted).
text = open(sys.argv[1]).read()
sent = int(re.search(r"(\d+) packets transmitted", text).group(1))
others = [f"10.77.0.{i}" for i in range(2, int(sys.argv[2]) + 1)]
got = {o: set() for o in others}
for m in re.finditer(r"bytes from ([\d.]+): icmp_seq=(\d+)", text):
    if m.group(1) in got:
        got[m.group(1)].add(int(m.group(2)))
# The last request is left out: ping exits two round trips after sending it, before the
# answers to a broadcast are all in.
sent -= 1
for o in others:
    got[o] &= set(range(1, sent + 1))
want = sent * len(others)
have = sum(len(v) for v in got.values())
for o in others:
    missing = sorted(set(range(1, sent + 1)) - got[o])
    if missing:
        print(f"membership: no answer from {o} to broadcast pings {missing[:20]}", file=sys.stderr)
print(f"{100 * (want - have) / max(want, 1):.2f}")
EOF
)
echo "membership: $rotations rotations; broadcast ping loss ${rotation_loss} %"

# --- vm3 revoked on vm1 only ---------------------------------------------------------------------
"$TB_BIN" ca revoke --dir "$CA" --cert "$TB_DIR/vm3.crt" --out "$TB_DIR/crl" >/dev/null ||
    die "ca revoke"
LIST=$("$TB_BIN" cert print "$TB_DIR/crl" | awk '/^number:/ {print $2}')
printf '[pki]\nca = "ca.crt"\ncertificate = "vm1.crt"\nrotate_s = %s\nrevocation_list = "crl"\n' "$ROTATE_S" >"$TB_DIR/pki1"
python3 - "$TB_DIR/vm1.toml" "$TB_DIR/pki1" <<'EOF'
import sys
path, pki = sys.argv[1], open(sys.argv[2]).read()
text = open(path).read()
start = text.index("\n[pki]") + 1
end = text.index("\n[daemon]") + 1
open(path, "w").write(text[:start] + pki + "\n" + text[end:])
EOF
revoked_at=$(date +%s.%N)
before_bcast=$(tb_x eve sh -c 'cat /proc/net/dev' | awk '/up0:/ {print $3}')
kill -HUP "$(cat "$TB_DIR/vm1.pid")"
spread=na
for _ in $(seq 1 300); do
    have=0
    for i in 1 2 4 5 6; do
        n=$(tb_status "$i" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("membership",{}).get("revocation_list",0))')
        [[ $n == "$LIST" ]] && have=$((have + 1))
    done
    if [[ $have == 5 ]]; then
        spread=$(python3 -c "import time; print(f'{time.time() - $revoked_at:.2f}')")
        break
    fi
    sleep 0.1
done
if [[ $spread != na ]]; then
    # The spread itself, from the daemons' own log lines (the polling above adds its own delay):
    # the last host's "revocation list in force" after vm1's.
    spread=$(python3 - "$TB_DIR" <<'EOF'
import datetime, re, sys
def at(n):
    for line in open(f"{sys.argv[1]}/vm{n}.log"):
        if "revocation list in force" in line:
            return datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00"))
start = at(1)
print(f"{max((at(n) - start).total_seconds() for n in (2, 4, 5, 6)):.3f}")
EOF
)
fi
echo "membership: list $LIST reached every other host in ${spread} s"
if [[ $spread == na ]]; then
    echo "membership: vm1's log:" >&2
    tail -20 "$TB_DIR/vm1.log" >&2
    tb_status 1 >&2
fi
# From here on eve's capture holds only frames sent after the revocation.
kill -INT "$(awk '/ tcpdump/ {print $1}' "$TB_DIR/pids" | head -1)" 2>/dev/null
tb_tcpdump eve "$TB_DIR/eve2.log" -i up0 -n -U -w "$TB_DIR/after.pcap" ether proto 0x1982 ||
    die "tcpdump"
# The others forget their neighbours: what they send next starts with ARP broadcasts.
for i in 1 2 4 5 6; do tb_x "vm$i" ip neigh flush dev psp0 2>/dev/null; done

# --- vm3 attacks; the others ping each other ---------------------------------------------------
count=$((ATTACK_S * 10))
for pair in "1 2" "4 5" "6 1" "2 4" "5 6"; do
    set -- $pair
    tb_bg "vm$1" "$TB_DIR/ping-$1-$2.log" ping -i 0.1 -c "$count" -W 1 "$(tb_ip "$2")"
done
for j in 1 2 4 5 6; do
    tb_x vm3 ping -c 2 -W 1 "$(tb_ip "$j")" >/dev/null 2>&1
    tb_x vm3 arping -c 2 -w 2 -I psp0 "$(tb_ip "$j")" >/dev/null 2>&1 || true
done
# vm3 replays everything it captured before its revocation (handshakes, announcements, broadcasts,
# session frames: eve's capture of path 1 is what vm3's port saw) into the segment.
replayed=$(tb_x vm3 python3 - "$TB_DIR/eve.pcap" up0 <<'EOF'
import socket, struct, sys
data = open(sys.argv[1], "rb").read()
end = "<" if struct.unpack("<I", data[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D) else ">"
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[2], 0))
off, n = 24, 0
while off + 16 <= len(data):
    incl = struct.unpack(end + "IIII", data[off:off + 16])[2]
    off += 16
    s.send(data[off:off + incl])
    off += incl
    n += 1
print(n)
EOF
)
echo "membership: vm3 replayed ${replayed:-0} frames captured before its revocation"
# vm3 restarts with every file it had: new Requests with its old certificate, announcements.
tb_gw_stop 3
tb_gw_start 3 || die "vm3 restart"
for j in 1 2 4 5 6; do tb_x vm3 ping -c 3 -W 1 "$(tb_ip "$j")" >/dev/null 2>&1; done
sleep "$ATTACK_S"
wait_pings() {
    local f
    for _ in $(seq 1 $((ATTACK_S * 10 + 100))); do
        f=0
        for l in "$TB_DIR"/ping-*.log; do grep -q "packets transmitted" "$l" || f=1; done
        [[ $f == 0 ]] && return 0
        sleep 0.1
    done
}
wait_pings
sent=0
got=0
for l in "$TB_DIR"/ping-*.log; do
    s=$(awk '/packets transmitted/ {print $1}' "$l")
    r=$(awk '/packets transmitted/ {print $4}' "$l")
    sent=$((sent + ${s:-0}))
    got=$((got + ${r:-0}))
done
loss=$(python3 -c "print(f'{100 * ($sent - $got) / max($sent, 1):.2f}')")

# Sessions with vm3 anywhere (a host's table shows it up).
revoked_sessions=0
for i in 1 2 4 5 6; do
    up=$(tb_status "$i" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(1 for p in d["peers"] if p["name"] == "vm3" and p.get("session", {}).get("state") == "up"))')
    revoked_sessions=$((revoked_sessions + up))
done

# What vm3's keys open among the broadcasts sent after the revocation (eve's capture: every
# frame vm3 received on path 1 too).
tb_gw_stop 3
kill -INT "$(awk '/ tcpdump/ {print $1}' "$TB_DIR/pids" | tail -1)" 2>/dev/null
sleep 0.5
"$TB_BIN" inspect --config "$TB_DIR/vm3.toml" --pcap "$TB_DIR/after.pcap" >"$TB_DIR/inspect.txt" 2>&1
read_bcast=$(python3 - "$TB_DIR/inspect.txt" "$(tb_mac 3)" <<'EOF'
import sys
# One block per frame ("frame N: ..."): a broadcast from another host that vm3's keys open
# ("verdict    icv ...") and that carries a protected frame (ARP, IPv4), not a sub-protocol.
blocks = open(sys.argv[1]).read().split("\nframe ")
n = 0
for b in blocks:
    eth = [l for l in b.split("\n") if "ethernet" in l]
    if not eth or "dst ff:ff:ff:ff:ff:ff" not in eth[0] or ("src " + sys.argv[2]) in eth[0]:
        continue
    if "verdict    icv" in b and ("protocol 0x0806" in b or "protocol 0x0800" in b):
        n += 1
print(n)
EOF
)
bcasts=$(grep -c "dst ff:ff:ff:ff:ff:ff" "$TB_DIR/inspect.txt")

echo "RESULT hosts=$NHOSTS join_edits_on_others=$edits revocation_spread_s=$spread rotations=$rotations rotation_ping_loss_pct=$rotation_loss revoked_broadcasts_read=$read_bcast broadcasts_after_revocation=$bcasts revoked_sessions=$revoked_sessions others_ping_loss_pct=$loss replayed=${replayed:-0}"
[[ $edits == 0 && $revoked_sessions == 0 && $spread != na ]] || exit 1
