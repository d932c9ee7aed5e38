#!/usr/bin/env bash
# testbed/flood.sh: the daemon under a keyless garbage flood (BENCHMARKS.md "Garbage flood"). Root; not in CI (the quick variant is a unit test,
# `the_icv_is_checked_before_the_signature`).
#
# Two gateways with identities (group frames signed, so the receiver holds a verifier for its
# peer) on a raw uplink, aes128-gcm. Eve sends garbage PSP frames "from vm2" to vm1 with the
# encryption and signature flags set (benches --bin flood) at each rate for SECONDS, while vm1
# pings vm2 every 20 ms. Per rate: the ping average and loss, and what vm1 counted
# (bad-icv vs bad-signature). The figure: the highest rate at which ping stays within 2x of
# idle with no loss.
#
# Usage: sudo testbed/flood.sh [--bin PATH] [--seconds S] [--rates "1000 5000 ..."]
#   (a binary from before [daemon] state_directory existed: TB_STATE=0 in the environment)
# Last line: RESULT flood_survived_fps=N idle_ms=… bad_icv=… bad_signature=…
set -euo pipefail
source "$(dirname "$0")/lib.sh"
SECONDS_PER=10
RATES="1000 2000 5000 10000 20000 50000 100000"
while (($#)); do
    case $1 in
        --bin) TB_BIN=$2; shift 2 ;;
        --seconds) SECONDS_PER=$2; shift 2 ;;
        --rates) RATES=$2; shift 2 ;;
        *) sed -n '2,16p' "$0"; exit 2 ;;
    esac
done
FLOOD=$TB_ROOT/target/release/flood
[[ -x $FLOOD ]] || (cd "$TB_ROOT" && cargo build --release --locked -p psp-benches --bin flood >&2)
export TB_SESSION=1 TB_IDENTITY=1
tb_init && tb_trap && tb_up 2 raw && tb_keys aes128-gcm && tb_identities &&
    tb_config 1 aes128-gcm raw && tb_config 2 aes128-gcm raw
tb_gw_start 1 >/dev/null
tb_gw_start 2 >/dev/null
tb_x vm1 ping -c 20 -i 0.2 -W 1 "$(tb_ip 2)" >/dev/null || true

ping_stats() { # -> "avg_ms loss_pct"
    tb_x vm1 ping -q -c "$1" -i 0.02 -W 1 "$(tb_ip 2)" |
        awk -F'[ /,%]+' '/packet loss/{for(i=1;i<=NF;i++) if($i=="packet") l=$(i-1)} /rtt/{a=$8} END{print a+0, l+0}'
}
drops() { # reason -> count at vm1 for peer vm2
    "$TB_BIN" status --socket "$(tb_sock 1)" --json |
        jq -r --arg r "$1" '.peers[] | select(.name=="vm2") | .drops[$r]'
}
read -r idle _ < <(ping_stats 200)
echo "idle ping ${idle} ms"
best=0
n=$((SECONDS_PER * 50))
icv0=$(drops bad-icv) sig0=$(drops bad-signature)
for rate in $RATES; do
    tb_x eve "$FLOOD" --iface up0 --dst "$(tb_mac 1)" --src "$(tb_mac 2)" \
        --rate "$rate" --seconds "$SECONDS_PER" >"$TB_DIR/flood.out" &
    fpid=$!
    sleep 0.5
    read -r avg loss < <(ping_stats $((n - 50)))
    wait "$fpid"
    sent=$(sed -n 's/.*rate=\([0-9]*\).*/\1/p' "$TB_DIR/flood.out")
    ok=$(awk -v a="$avg" -v i="$idle" -v l="$loss" 'BEGIN{print (l == 0 && a <= 2 * i) ? 1 : 0}')
    echo "rate=$rate achieved=$sent ping_ms=$avg loss_pct=$loss within_2x=$ok"
    if [[ $ok == 1 ]]; then best=$sent; else break; fi
done
icv=$(($(drops bad-icv) - icv0)) sig=$(($(drops bad-signature) - sig0))
echo "RESULT flood_survived_fps=$best idle_ms=$idle bad_icv=$icv bad_signature=$sig"
