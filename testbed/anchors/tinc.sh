#!/usr/bin/env bash
# Anchor: tinc 1.0 (Debian package `tinc`) in switch mode, Cipher = blowfish, Digest = sha1,
# between two network namespaces over their uplink IPs, with a TAP carrying the inner IPs.
#
#   tinc.sh install              # apt-get install tinc if missing; checks it is 1.0.x
#   tinc.sh up DIR NS1 NS2       # config + keys in DIR, start both tincd, wait until the tunnel
#                                # carries traffic over UDP at its final PMTU; prints one line
#                                # describing what runs (cipher/digest as tinc reports them)
#   tinc.sh down DIR             # stop both tincd (by their recorded pids)
#
# Settings: tinc's defaults otherwise (MACLength 4, PMTUDiscovery and ClampMSS on, TAP MTU
# 1500). tinc sends frames larger than the discovered PMTU over its TCP meta connection, so `up`
# waits until PMTU discovery has finished before returning.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

cmd=${1:-}
shift || true

install() {
    apt_install tinc
    local v
    v=$(tincd --version | head -1)
    case $v in
    "tinc version 1.0."*) ;;
    *) die "need tinc 1.0.x, found: $v" ;;
    esac
    # tinc links OpenSSL 3; Blowfish lives in its legacy provider (libssl3 ships legacy.so).
}

# OpenSSL config that activates the legacy provider (Blowfish) next to the default one.
write_openssl_cnf() {
    cat >"$1" <<'CNF'
openssl_conf = openssl_init
[openssl_init]
providers = provider_sect
[provider_sect]
default = default_sect
legacy = legacy_sect
[default_sect]
activate = 1
[legacy_sect]
activate = 1
CNF
}

node_conf() { # DIR NAME OTHER ADDR INNER [connect]
    local d=$1 name=$2 other=$3 addr=$4 inner=$5 connect=${6:-}
    mkdir -p "$d/hosts"
    {
        echo "Name = $name"
        echo "Mode = switch"
        echo "DeviceType = tap"
        echo "Interface = tnc0"
        echo "AddressFamily = ipv4"
        echo "BindToAddress = $addr"
        [ -n "$connect" ] && echo "ConnectTo = $other"
    } >"$d/tinc.conf"
    {
        echo "Address = $addr"
        echo "Port = 655"
        echo "Cipher = blowfish"
        echo "Digest = sha1"
    } >"$d/hosts/$name"
    cat >"$d/tinc-up" <<UP
#!/bin/sh
ip link set "\$INTERFACE" up
ip addr add $inner/$IN_PREFIX dev "\$INTERFACE"
UP
    chmod 755 "$d/tinc-up"
    tincd -c "$d" -K2048 </dev/null >"$d/keygen.log" 2>&1 || die "tincd -K failed: $(cat "$d/keygen.log")"
}

# pmtu_line DIR N: ask tincd N (SIGUSR2) to dump its nodes; print the line about the peer.
pmtu_line() {
    local d=$1 n=$2 peer=$3 before
    before=$(wc -l <"$d/tincd$n.log")
    kill -USR2 "$(<"$d/tincd$n.pid")"
    sleep 0.3
    tail -n +"$((before + 1))" "$d/tincd$n.log" | grep -E "^ *$peer at .*pmtu" | tail -1
}

# pmtu_fixed LINE: the dump line says PMTU discovery has finished (min == max > 0).
pmtu_fixed() {
    [[ $1 =~ \(min\ ([0-9]+)\ max\ ([0-9]+)\) ]] &&
        [ "${BASH_REMATCH[1]}" -gt 0 ] && [ "${BASH_REMATCH[1]}" -eq "${BASH_REMATCH[2]}" ]
}

up() {
    # shellcheck disable=SC2034 # ns2 is read as ${!ns}
    local d=$1 ns1=$2 ns2=$3
    install
    mkdir -p "$d"
    local cnf="$d/openssl-legacy.cnf"
    write_openssl_cnf "$cnf"
    node_conf "$d/vm1" vm1 vm2 "$UP1" "$IN1" connect
    node_conf "$d/vm2" vm2 vm1 "$UP2" "$IN2"
    cp "$d/vm1/hosts/vm1" "$d/vm2/hosts/vm1"
    cp "$d/vm2/hosts/vm2" "$d/vm1/hosts/vm2"
    local n ns
    for n in 2 1; do
        ns=ns$n
        bg_in_ns "${!ns}" "$d/tincd$n.pid" "$d/tincd$n.log" \
            env OPENSSL_CONF="$cnf" tincd -c "$d/vm$n" -D -d1 --pidfile="$d/vm$n/tincd.pid"
    done
    wait_for 10 ip netns exec "$ns1" ping -c1 -W1 "$IN2" ||
        die "tinc tunnel does not carry ping (logs: $d/tincd*.log)"
    # Keep a little traffic flowing while PMTU discovery runs (probes start with the key
    # exchange); done when the dump says min == max.
    local i line=""
    for ((i = 0; i < 60; i++)); do
        ip netns exec "$ns1" ping -c3 -i0.2 -W1 -s 1400 "$IN2" >/dev/null 2>&1 || true
        line=$(pmtu_line "$d" 1 vm2)
        pmtu_fixed "$line" && pmtu_fixed "$(pmtu_line "$d" 2 vm1)" && break
    done
    [ -n "$line" ] || die "tincd gave no node dump (log: $d/tincd1.log)"
    # NIDs: 91 = bf-cbc, 64 = sha1.
    [[ $line =~ cipher\ 91\ digest\ 64 ]] || die "tinc does not run bf-cbc/sha1: $line"
    echo "$(tincd --version | head -1), switch mode, cipher 91 (bf-cbc) digest 64 (sha1): $(echo "$line" | sed 's/^ *//')"
}

down() {
    local d=$1
    stop_pidfiles "$d"/tincd*.pid
}

case $cmd in
install) install ;;
up) up "$@" ;;
down) down "$@" ;;
*) die "usage: tinc.sh install | up DIR NS1 NS2 | down DIR" ;;
esac
