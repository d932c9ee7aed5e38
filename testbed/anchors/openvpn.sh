#!/usr/bin/env bash
# Anchor: OpenVPN 2.6 (Debian package `openvpn`), `dev tap`, static key, cipher BF-CBC, auth
# SHA1, UDP between two network namespaces over their uplink IPs, TAP with the inner IPs.
#
#   openvpn.sh install            # apt-get install openvpn if missing; checks it is 2.6.x
#   openvpn.sh up DIR NS1 NS2     # static key + configs in DIR, start both ends, wait for the
#                                 # tunnel, check in the log that BF-CBC/SHA1 are in use; prints
#                                 # one line describing what runs
#   openvpn.sh down DIR           # stop both (by their recorded pids)
#
# Blowfish is in OpenSSL 3's legacy provider: `providers legacy default`. OpenVPN's defaults
# otherwise (tun-mtu 1500, mssfix 1492, no compression, one thread). verb 4 so the log names the
# data-channel cipher and HMAC.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

cmd=${1:-}
shift || true

install() {
    apt_install openvpn
    local v
    v=$(openvpn --version | head -1)
    case $v in
    "OpenVPN 2.6."*) ;;
    *) die "need OpenVPN 2.6.x, found: $v" ;;
    esac
}

conf() { # FILE LOCAL REMOTE INNER DIRECTION KEY
    cat >"$1" <<CONF
dev tap
dev-type tap
proto udp
local $2
lport 1194
remote $3
rport 1194
secret $6 $5
cipher BF-CBC
auth SHA1
providers legacy default
ifconfig $4 255.255.255.0
persist-tun
verb 4
CONF
}

up() {
    local d=$1 ns1=$2 ns2=$3
    install
    mkdir -p "$d"
    openvpn --genkey secret "$d/static.key" >/dev/null 2>&1 || die "openvpn --genkey failed"
    chmod 600 "$d/static.key"
    conf "$d/vm1.conf" "$UP1" "$UP2" "$IN1" 0 "$d/static.key"
    conf "$d/vm2.conf" "$UP2" "$UP1" "$IN2" 1 "$d/static.key"
    bg_in_ns "$ns2" "$d/openvpn2.pid" "$d/openvpn2.log" openvpn --config "$d/vm2.conf"
    bg_in_ns "$ns1" "$d/openvpn1.pid" "$d/openvpn1.log" openvpn --config "$d/vm1.conf"
    wait_for 15 ip netns exec "$ns1" ping -c1 -W1 "$IN2" ||
        die "openvpn tunnel does not carry ping (logs: $d/openvpn*.log)"
    local n
    for n in 1 2; do
        grep -q "Outgoing Static Key Encryption: Cipher 'BF-CBC'" "$d/openvpn$n.log" &&
            grep -q "Incoming Static Key Encryption: Cipher 'BF-CBC'" "$d/openvpn$n.log" &&
            grep -q "Outgoing Static Key Encryption: Using 160 bit message hash 'SHA1'" "$d/openvpn$n.log" &&
            grep -q "Incoming Static Key Encryption: Using 160 bit message hash 'SHA1'" "$d/openvpn$n.log" ||
            die "openvpn end $n does not use BF-CBC + SHA1 (log: $d/openvpn$n.log)"
    done
    echo "$(openvpn --version | head -1 | cut -d' ' -f1-2), dev tap, static key; log:" \
        "$(grep -m1 -o "Outgoing Static Key Encryption: Cipher 'BF-CBC'.*" "$d/openvpn1.log");" \
        "$(grep -m1 -o "Outgoing Static Key Encryption: Using .*" "$d/openvpn1.log")"
}

down() {
    local d=$1
    stop_pidfiles "$d"/openvpn*.pid
}

case $cmd in
install) install ;;
up) up "$@" ;;
down) down "$@" ;;
*) die "usage: openvpn.sh install | up DIR NS1 NS2 | down DIR" ;;
esac
