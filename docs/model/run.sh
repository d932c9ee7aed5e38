#!/bin/sh
# Runs every query of every scenario of the ProVerif model of SEP + SMKEX, one query per
# ProVerif run, one run at a time, each under a time limit; prints each query's verdict.
# Installs ProVerif 2.05 first if `proverif` (or $PROVERIF) is missing or another version.
#
#   docs/model/run.sh                       every scenario (a_*.pv ... f_*.pv)
#   docs/model/run.sh a_one_path_active.pv  one scenario
#   docs/model/run.sh a_one_path_active.pv:3  its third query only
#   docs/model/run.sh a.pv:3 b.pv:1            several (scenario or scenario:query) in turn
#
# Environment:
#   PV_TIMEOUT   seconds per query (default 600)
#   PV_MEM_KB    virtual-memory limit per run in KiB (default 8000000, 8 GB)
#   PV_OUT       directory for the per-query files and logs (default /tmp/psp-model-out)
#   PROVERIF     the binary to use (default: `proverif` on PATH, else the one this installs)
#   PROVERIF_PREFIX  where to install (default $HOME/.local/proverif-2.05)
#   PROVERIF_SRC     a ProVerif 2.05 source tree or tarball to build instead of downloading
#   PV_GIT_MIRROR    a git repository holding the 2.05 source tree at its root, tried when the
#                    INRIA tarball cannot be downloaded (default: the GitHub copy below)
#
# Output: one line per query, tab-separated: scenario, query number, verdict (true, false,
# cannot-be-proved, trace-with-hypothesis, timeout, error), seconds, and the RESULT line(s) of
# ProVerif. The same lines go to $PV_OUT/summary.tsv; the full ProVerif output of query N of scenario S is
# $PV_OUT/S.qN.log. ProVerif is single-threaded: the runs are sequential and niced, so this
# uses one core.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
PV_VERSION=2.05
PV_TIMEOUT=${PV_TIMEOUT:-600}
PV_MEM_KB=${PV_MEM_KB:-8000000}
PV_OUT=${PV_OUT:-/tmp/psp-model-out}
PROVERIF_PREFIX=${PROVERIF_PREFIX:-$HOME/.local/proverif-$PV_VERSION}
PV_URL=https://bblanche.gitlabpages.inria.fr/proverif/proverif$PV_VERSION.tar.gz
# An unofficial copy of the 2.05 source on GitHub (one commit, bcf1187a1f26, "init: add source
# code"; its CHANGES file starts at "Version 2.05"). Used only when the INRIA site is
# unreachable; the verdicts in README.md were obtained with a binary built from it.
PV_GIT_MIRROR=${PV_GIT_MIRROR:-https://github.com/comeillfoo/proverif_2_05}
PV_GIT_COMMIT=bcf1187a1f26cef65e316234618c37f4a11c8425

version_of() {
    "$1" -help 2>&1 | sed -n 's/^Proverif \([0-9.]*\)\..*/\1/p' | head -n 1
}

install_proverif() {
    # Debian 12 has no proverif package; build from source with the OCaml of the distribution.
    if ! command -v ocamlfind >/dev/null 2>&1 || ! command -v ocamlopt >/dev/null 2>&1; then
        echo "run.sh: installing ocaml-nox and ocaml-findlib (apt-get)" >&2
        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y ocaml-nox ocaml-findlib
    fi
    build=$(mktemp -d)
    if [ -n "${PROVERIF_SRC:-}" ] && [ -d "$PROVERIF_SRC" ]; then
        cp -R "$PROVERIF_SRC"/. "$build"/
    else
        tarball=${PROVERIF_SRC:-}
        if [ -z "$tarball" ]; then
            tarball=$build.tar.gz
            echo "run.sh: downloading $PV_URL" >&2
            if ! curl -fsSL -o "$tarball" "$PV_URL"; then
                echo "run.sh: download failed; cloning $PV_GIT_MIRROR" >&2
                tarball=
                rmdir "$build"
                git clone -q "$PV_GIT_MIRROR" "$build"
                if [ "$PV_GIT_MIRROR" = https://github.com/comeillfoo/proverif_2_05 ]; then
                    git -C "$build" checkout -q "$PV_GIT_COMMIT"
                fi
            fi
        fi
        if [ -n "$tarball" ]; then
            tar -xzf "$tarball" -C "$build" --strip-components=1
        fi
    fi
    echo "run.sh: building ProVerif in $build (about a minute)" >&2
    (cd "$build" && ./build -nointeract >"$build/build.log" 2>&1) ||
        { echo "run.sh: build failed, see $build/build.log" >&2; exit 1; }
    mkdir -p "$PROVERIF_PREFIX"
    cp "$build/proverif" "$PROVERIF_PREFIX/proverif"
    rm -rf "$build"
}

if [ -z "${PROVERIF:-}" ]; then
    if command -v proverif >/dev/null 2>&1 && [ "$(version_of proverif)" = "$PV_VERSION" ]; then
        PROVERIF=$(command -v proverif)
    else
        PROVERIF=$PROVERIF_PREFIX/proverif
    fi
fi
if [ ! -x "$PROVERIF" ] || [ "$(version_of "$PROVERIF")" != "$PV_VERSION" ]; then
    install_proverif
    PROVERIF=$PROVERIF_PREFIX/proverif
fi
echo "# $("$PROVERIF" -help 2>&1 | head -n 1) ($PROVERIF)"

mkdir -p "$PV_OUT"
: >"$PV_OUT/summary.tsv"

# The query blocks of a scenario: a block starts at a line beginning with `query` and ends at
# the first line that ends with a full stop. Prints the number of blocks.
count_queries() {
    awk '/^query/ {q=1} q && /\.[ \t]*$/ {n++; q=0} END {print n+0}' "$1"
}

# The scenario with only its N-th query block kept (everything else unchanged).
one_query() {
    awk -v want="$2" '
        /^query/ {q=1; n++}
        { if (!q || n == want) print }
        q && /\.[ \t]*$/ {q=0}
    ' "$1"
}

run_one() {
    file=$1 n=$2
    name=$(basename "$file" .pv)
    pv=$PV_OUT/$name.q$n.pv
    log=$PV_OUT/$name.q$n.log
    one_query "$file" "$n" >"$pv"
    start=$(date +%s)
    set +e
    (ulimit -v "$PV_MEM_KB"; cd "$HERE" &&
        exec timeout "$PV_TIMEOUT" nice -n 10 "$PROVERIF" -lib "$HERE/sep.pvl" "$pv") >"$log" 2>&1
    rc=$?
    set -e
    secs=$(( $(date +%s) - start ))
    results=$(grep '^RESULT' "$log" | sed 's/^RESULT //' | tr '\n' ' ' || true)
    if [ "$rc" -eq 124 ]; then
        verdict=timeout
    elif [ "$rc" -ne 0 ] || [ -z "$results" ]; then
        verdict=error
    elif printf '%s' "$results" | grep -q 'cannot be proved' &&
        grep -q 'A trace has been found, assuming' "$log"; then
        # ProVerif rebuilt a trace reaching the goal but could not check one step of it (it
        # states the hypothesis it needed): README.md, "Reading the verdicts".
        verdict=trace-with-hypothesis
    elif printf '%s' "$results" | grep -q 'cannot be proved'; then
        verdict=cannot-be-proved
    elif printf '%s' "$results" | grep -q 'is false'; then
        verdict=false
    else
        verdict=true
    fi
    line=$(printf '%s\t%s\t%s\t%s\t%s' "$name" "$n" "$verdict" "$secs" "$results")
    printf '%s\n' "$line" | tee -a "$PV_OUT/summary.tsv"
}

if [ $# -eq 0 ]; then
    set -- "$HERE"/[a-f]_*.pv
fi
for arg in "$@"; do
    case $arg in
        *.pv:*) file=${arg%:*} only=${arg##*:} ;;
        *) file=$arg only= ;;
    esac
    [ -f "$file" ] || file=$HERE/$file
    total=$(count_queries "$file")
    i=1
    while [ "$i" -le "$total" ]; do
        if [ -z "$only" ] || [ "$only" = "$i" ]; then
            run_one "$file" "$i"
        fi
        i=$((i + 1))
    done
done
