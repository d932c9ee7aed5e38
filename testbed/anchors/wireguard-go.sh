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
    wg_keys "$d"
    start "$ns1" "$if1" 1 "$d"
    start "$ns2" "$if2" 2 "$d"
    wg_link "$d" "$ns1" "$ns2" "$if1" "$if2" wireguard-go "$d/wggo*.log"
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
