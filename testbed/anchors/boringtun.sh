#!/usr/bin/env bash
# Anchor: boringtun (crates.io `boringtun-cli`, the userspace WireGuard), configured with `wg`
# from wireguard-tools, between two network namespaces over their uplink IPs; a TUN (layer 3)
# with the inner IPs.
#
#   boringtun.sh install          # wireguard-tools via apt-get; `cargo install boringtun-cli
#                                 # --locked` into $PSP_COMPARE_CACHE/boringtun (once)
#   boringtun.sh up DIR NS1 NS2   # keys in DIR, start both ends single-threaded, configure with
#                                 # `wg`, wait for the handshake; prints one line
#   boringtun.sh down DIR         # stop both (by their recorded pids)
#
# boringtun runs with --foreground --disable-drop-privileges --threads $BT_THREADS (default 1).
# Its UAPI socket is /var/run/wireguard/<interface>.sock, shared by all namespaces, so the
# interface names carry a per-run suffix. The TUN MTU is 1420 (wg-quick's default).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

: "${BT_THREADS:=1}"
bt_root="$PSP_COMPARE_CACHE/boringtun"
bt_bin="$bt_root/bin/boringtun-cli"

cmd=${1:-}
shift || true

install() {
    apt_install wireguard-tools
    if [ ! -x "$bt_bin" ]; then
        command -v cargo >/dev/null || die "cargo not found (needed to build boringtun-cli)"
        mkdir -p "$bt_root"
        note "cargo install boringtun-cli --locked --root $bt_root (once; about a minute)"
        CARGO_HOME="$bt_root/cargo-home" CARGO_TARGET_DIR="$bt_root/target" \
            cargo install boringtun-cli --locked --root "$bt_root" >"$bt_root/install.log" 2>&1 ||
            die "cargo install boringtun-cli failed (log: $bt_root/install.log)"
        rm -rf "$bt_root/target"
    fi
}

up() {
    local d=$1 ns1=$2 ns2=$3
    install
    mkdir -p "$d"
    # Names unique among running instances (our pid), <= 15 bytes.
    local if1="bt1-$$" if2="bt2-$$"
    echo "$if1 $if2" >"$d/ifnames"
    (
        umask 077
        wg genkey >"$d/vm1.key"
        wg genkey >"$d/vm2.key"
    )
    local pub1 pub2
    pub1=$(wg pubkey <"$d/vm1.key")
    pub2=$(wg pubkey <"$d/vm2.key")
    bg_in_ns "$ns1" "$d/boringtun1.pid" "$d/boringtun1.log" \
        "$bt_bin" --foreground --disable-drop-privileges --threads "$BT_THREADS" \
        --log "$d/boringtun1.out" "$if1"
    bg_in_ns "$ns2" "$d/boringtun2.pid" "$d/boringtun2.log" \
        "$bt_bin" --foreground --disable-drop-privileges --threads "$BT_THREADS" \
        --log "$d/boringtun2.out" "$if2"
    wait_for 10 test -S "/var/run/wireguard/$if1.sock" ||
        die "boringtun did not create its UAPI socket (log: $d/boringtun1.log)"
    wait_for 10 test -S "/var/run/wireguard/$if2.sock" ||
        die "boringtun did not create its UAPI socket (log: $d/boringtun2.log)"
    ip netns exec "$ns1" wg set "$if1" private-key "$d/vm1.key" listen-port 51820 \
        peer "$pub2" endpoint "$UP2:51820" allowed-ips "$IN2/32"
    ip netns exec "$ns2" wg set "$if2" private-key "$d/vm2.key" listen-port 51820 \
        peer "$pub1" endpoint "$UP1:51820" allowed-ips "$IN1/32"
    ip -n "$ns1" addr add "$IN1/$IN_PREFIX" dev "$if1"
    ip -n "$ns2" addr add "$IN2/$IN_PREFIX" dev "$if2"
    ip -n "$ns1" link set "$if1" mtu 1420 up
    ip -n "$ns2" link set "$if2" mtu 1420 up
    wait_for 10 ip netns exec "$ns1" ping -c1 -W1 "$IN2" ||
        die "boringtun tunnel does not carry ping (logs: $d/boringtun*.log)"
    # (boringtun's UAPI reports no handshake time; the transfer counters prove the session.)
    ip netns exec "$ns1" wg show "$if1" transfer | awk '$2 > 0 && $3 > 0 {ok = 1} END {exit !ok}' ||
        die "no WireGuard traffic counted on $if1"
    echo "boringtun-cli $("$bt_bin" --version | awk '{print $2}') (userspace WireGuard," \
        "ChaCha20-Poly1305), --threads $BT_THREADS, wg $(wg --version | awk '{print $2}'), TUN MTU 1420"
}

down() {
    local d=$1
    stop_pidfiles "$d"/boringtun*.pid
}

case $cmd in
install) install ;;
up) up "$@" ;;
down) down "$@" ;;
*) die "usage: boringtun.sh install | up DIR NS1 NS2 | down DIR" ;;
esac
