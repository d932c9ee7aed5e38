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
    wg_keys "$d"
    bg_in_ns "$ns1" "$d/boringtun1.pid" "$d/boringtun1.log" \
        "$bt_bin" --foreground --disable-drop-privileges --threads "$BT_THREADS" \
        --log "$d/boringtun1.out" "$if1"
    bg_in_ns "$ns2" "$d/boringtun2.pid" "$d/boringtun2.log" \
        "$bt_bin" --foreground --disable-drop-privileges --threads "$BT_THREADS" \
        --log "$d/boringtun2.out" "$if2"
    wg_link "$d" "$ns1" "$ns2" "$if1" "$if2" boringtun "$d/boringtun*.log"
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
