#!/usr/bin/env bash
# Anchor: wireguard-go (Debian package `wireguard-go`, the Go userspace WireGuard), configured
# with `wg` from wireguard-tools, between two network namespaces over their uplink IPs; a TUN
# (layer 3) with the inner IPs. The same set-up as anchors/boringtun.sh.
#
#   wireguard-go.sh install         # apt-get install wireguard-go wireguard-tools if missing
#   wireguard-go.sh up DIR NS1 NS2  # keys in DIR, start both ends, configure with `wg`, wait
#                                   # for the handshake; prints one line
#   wireguard-go.sh down DIR        # stop both (by their recorded pids)
#
# This machine has no wireguard kernel module, so wireguard-go is the only WireGuard besides
# boringtun; it needs /dev/net/tun (it creates the TUN itself, in the namespace it starts in).
# It runs in the foreground (`-f`); WG_PROCESS_FOREGROUND=1 also silences its banner telling
# Linux users to prefer the kernel module. Go's scheduler uses every CPU (GOMAXPROCS = the CPU
# count) unless WGGO_GOMAXPROCS is set; the package's defaults are what we measure. Its UAPI
# socket is /var/run/wireguard/<interface>.sock, shared by all namespaces, so the interface
# names carry a per-run suffix. The TUN MTU is 1420 (wireguard-go's and wg-quick's default).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

: "${WGGO_GOMAXPROCS:=}"

cmd=${1:-}
shift || true

install() {
    apt_install wireguard-go wireguard-tools
    [ -c /dev/net/tun ] || die "no /dev/net/tun (wireguard-go needs a TUN device)"
}

version() { wireguard-go --version | awk 'NR == 1 {print $2}'; }

start() { # NS IFNAME N DIR
    local ns=$1 ifname=$2 n=$3 d=$4 env=(WG_PROCESS_FOREGROUND=1)
    [ -z "$WGGO_GOMAXPROCS" ] || env+=(GOMAXPROCS="$WGGO_GOMAXPROCS")
    bg_in_ns "$ns" "$d/wggo$n.pid" "$d/wggo$n.log" env "${env[@]}" wireguard-go -f "$ifname"
}

up() {
    local d=$1 ns1=$2 ns2=$3
    install
    mkdir -p "$d"
    # Names unique among running instances (our pid), <= 15 bytes.
    local if1="wgg1-$$" if2="wgg2-$$"
    echo "$if1 $if2" >"$d/ifnames"
    (
        umask 077
        wg genkey >"$d/vm1.key"
        wg genkey >"$d/vm2.key"
    )
    local pub1 pub2
    pub1=$(wg pubkey <"$d/vm1.key")
    pub2=$(wg pubkey <"$d/vm2.key")
    start "$ns1" "$if1" 1 "$d"
    start "$ns2" "$if2" 2 "$d"
    wait_for 10 test -S "/var/run/wireguard/$if1.sock" ||
        die "wireguard-go did not create its UAPI socket (log: $d/wggo1.log)"
    wait_for 10 test -S "/var/run/wireguard/$if2.sock" ||
        die "wireguard-go did not create its UAPI socket (log: $d/wggo2.log)"
    ip netns exec "$ns1" wg set "$if1" private-key "$d/vm1.key" listen-port 51820 \
        peer "$pub2" endpoint "$UP2:51820" allowed-ips "$IN2/32"
    ip netns exec "$ns2" wg set "$if2" private-key "$d/vm2.key" listen-port 51820 \
        peer "$pub1" endpoint "$UP1:51820" allowed-ips "$IN1/32"
    ip -n "$ns1" addr add "$IN1/$IN_PREFIX" dev "$if1"
    ip -n "$ns2" addr add "$IN2/$IN_PREFIX" dev "$if2"
    ip -n "$ns1" link set "$if1" mtu 1420 up
    ip -n "$ns2" link set "$if2" mtu 1420 up
    wait_for 10 ip netns exec "$ns1" ping -c1 -W1 "$IN2" ||
        die "wireguard-go tunnel does not carry ping (logs: $d/wggo*.log)"
    # Unlike boringtun, wireguard-go reports the handshake time: a session exists.
    ip netns exec "$ns1" wg show "$if1" latest-handshakes | awk '$2 > 0 {ok = 1} END {exit !ok}' ||
        die "no WireGuard handshake on $if1"
    local procs=${WGGO_GOMAXPROCS:-"$(nproc) (all CPUs)"}
    echo "wireguard-go $(version) (Debian, userspace WireGuard, ChaCha20-Poly1305)," \
        "GOMAXPROCS $procs, wg $(wg --version | awk '{print $2}'), TUN MTU 1420"
}

down() {
    local d=$1
    stop_pidfiles "$d"/wggo*.pid
}

case $cmd in
install) install ;;
up) up "$@" ;;
down) down "$@" ;;
*) die "usage: wireguard-go.sh install | up DIR NS1 NS2 | down DIR" ;;
esac
