#!/usr/bin/env bash
# benches/run-criterion.sh: runs psp-benches' criterion benches one bench file at a time, then
# turns criterion's saved estimates into BENCHMARKS.md's tables (`--bin criterion_tables`:
# median, its 95 % confidence interval, throughput, ratios to a reference row of the same run).
#
# Usage:
#   benches/run-criterion.sh [--quick] [--write] [BENCH...]
#
#   --quick   a smoke run: criterion's --quick capped at 0.05 s per benchmark (no warm-up, two
#             batches, 1 000 resamples) and blowfish's interleaved part in its smoke setting.
#             Under a minute once built; the numbers are meaningless. It never touches
#             BENCHMARKS.md: the tables are written into a copy of it
#             (target/criterion-tables/quick/), which exercises the rewrite between the markers.
#   --write   replace BENCHMARKS.md's lines between <!-- criterion-tables:begin --> and
#             <!-- criterion-tables:end --> (full mode with every bench file only)
#   BENCH...  only these bench files (default: scramble primitives seal_open blowfish handshake
#             replay)
#
# Durations of the full mode on the project's 2-vCPU guest (build not included; measured
# 2026-11-29, BENCHMARKS.md; each bench file's doc comment has its count): scramble 80 s (56
# benchmarks with AVX2; 68 with AVX-512), primitives 91 s (60), seal_open 83 s (56), blowfish
# 45 s (19 + the interleaved table), handshake 19 s (4), replay 6 s (2): about 5.5 minutes in
# all. Building the bench binaries (fat LTO, one codegen unit) takes ~5 minutes more from
# scratch.
#
# The bench binaries are built once, then run directly (as `cargo bench` would, from benches/
# with `--bench`), so a source edited during the run cannot trigger a rebuild in the middle of
# it. Each run starts from an empty target/criterion-tables/MODE/ and makes it criterion's home
# (CRITERION_HOME), so the tables show this run only and criterion spends no time comparing with
# an earlier one. It holds criterion/ (the saved estimates), durations (build and per-file wall
# time, load average before and after), bench.log (cargo's and criterion's output) and
# tables.md.
# Exit 0 when every bench ran and the tables were written, 1 otherwise, 2 on bad arguments.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
ALL=(scramble primitives seal_open blowfish handshake replay)
QUICK=0
WRITE=0
BENCHES=()

usage() { sed -n '/^# Usage:/,/^# Durations/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
bad_usage() {
    echo "run-criterion.sh: $1" >&2
    usage >&2
    exit 2
}

ARGS=("$@")
while [ $# -gt 0 ]; do
    case $1 in
    --quick) QUICK=1; shift ;;
    --write) WRITE=1; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) bad_usage "unknown argument '$1'" ;;
    *)
        [[ " ${ALL[*]} " == *" $1 "* ]] || bad_usage "no bench file '$1' (one of: ${ALL[*]})"
        BENCHES+=("$1")
        shift
        ;;
    esac
done
if [ ${#BENCHES[@]} -eq 0 ]; then
    BENCHES=("${ALL[@]}")
elif [ $WRITE = 1 ]; then
    bad_usage "--write needs every bench file (BENCHMARKS.md's tables would lose the others)"
fi
if [ $WRITE = 1 ] && [ $QUICK = 1 ]; then
    bad_usage "--write with --quick: a smoke run's numbers are meaningless (--quick alone rewrites a copy)"
fi

MODE=full
CRITERION_ARGS=()
if [ $QUICK = 1 ]; then
    MODE=quick
    CRITERION_ARGS=(--quick --measurement-time 0.05 --nresamples 1000)
fi
OUT=$ROOT/target/criterion-tables/$MODE
rm -rf "$OUT"
mkdir -p "$OUT/criterion"
DURATIONS=$OUT/durations
LOG=$OUT/bench.log
: >"$LOG"
echo "# name seconds [load_before load_after]: benches/run-criterion.sh ${ARGS[*]}" >"$DURATIONS"

load1() { cut -d' ' -f1 /proc/loadavg; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

cd "$ROOT"
echo "run-criterion: building ${BENCHES[*]} and criterion_tables (bench profile)" >&2
T0=$EPOCHREALTIME
BENCH_FLAGS=()
for b in "${BENCHES[@]}"; do BENCH_FLAGS+=(--bench "$b"); done
build_failed() {
    tail -n 30 "$LOG" >&2
    echo "run-criterion: build failed (log: $LOG)" >&2
    exit 1
}
JSON=$OUT/build.json
cargo bench -p psp-benches --no-run --message-format=json-render-diagnostics "${BENCH_FLAGS[@]}" \
    >"$JSON" 2>>"$LOG" || build_failed
cargo build --profile bench -p psp-benches --bin criterion_tables \
    --message-format=json-render-diagnostics >>"$JSON" 2>>"$LOG" || build_failed
echo "build $(since "$T0")" >>"$DURATIONS"

# The executable cargo built for target $2 of kind $1 (from its JSON messages).
exe_of() {
    local exe
    exe=$(sed -n 's/^.*"target":{"kind":\["'"$1"'"\],"crate_types":\["bin"\],"name":"'"$2"'".*"executable":"\([^"]*\)".*$/\1/p' \
        "$JSON" | tail -n 1)
    [ -x "$exe" ] || { echo "run-criterion: no executable for $1 $2 in $JSON" >&2; exit 1; }
    echo "$exe"
}

TOTAL0=$EPOCHREALTIME
for b in "${BENCHES[@]}"; do
    L0=$(load1)
    T0=$EPOCHREALTIME
    echo "===== $b" >>"$LOG"
    EXE=$(exe_of bench "$b")
    (cd "$HERE" && CRITERION_HOME=$OUT/criterion "$EXE" --bench "${CRITERION_ARGS[@]}") >>"$LOG" 2>&1 ||
        { tail -n 30 "$LOG" >&2; echo "run-criterion: --bench $b failed (log: $LOG)" >&2; exit 1; }
    S=$(since "$T0")
    echo "$b $S $L0 $(load1)" >>"$DURATIONS"
    echo "run-criterion: $b done in ${S} s" >&2
done
echo "run-criterion: benches done in $(since "$TOTAL0") s; log: $LOG" >&2

TABLES=("$(exe_of bin criterion_tables)" --dir "$OUT/criterion" --durations "$DURATIONS"
    --mode "$MODE" --command "benches/run-criterion.sh ${ARGS[*]}")
if [ $WRITE = 1 ]; then
    "${TABLES[@]}" --write "$ROOT/BENCHMARKS.md" >"$OUT/tables.md"
elif [ $QUICK = 1 ]; then
    cp "$ROOT/BENCHMARKS.md" "$OUT/BENCHMARKS.md"
    "${TABLES[@]}" --write "$OUT/BENCHMARKS.md" >"$OUT/tables.md"
else
    "${TABLES[@]}" >"$OUT/tables.md"
fi
cat "$OUT/tables.md"
echo "run-criterion: tables in $OUT/tables.md" >&2
