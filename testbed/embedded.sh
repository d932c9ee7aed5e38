#!/usr/bin/env bash
# testbed/embedded.sh: psp-core on embedded targets (docs/TARGETS.md).
#
# 1. Builds psp-core with the RustCrypto backend (no allocator) and checks it with `alloc` (the
#    host module) for each target below. A target rustup cannot add is skipped with one line.
# 2. Builds crates/psp-cortex-m for thumbv7em-none-eabihf and runs it under qemu-system-arm
#    (MPS2 AN386, Cortex-M4F, -icount shift=0): psp-kat's known-answer checks, per-frame cost in
#    guest instructions, flash and RAM. Exit status 0 only if every check passed.
#
# Usage: testbed/embedded.sh      (.ci/run runs it; qemu-system-arm from testbed/install-deps.sh)
# Output ends with: RESULT targets_built=N targets_skipped=N cortex_m_checks=pass|fail
#                   flash_bytes=N stack_peak_bytes=N
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(thumbv7em-none-eabihf thumbv6m-none-eabi riscv32imac-unknown-none-elf aarch64-unknown-none)
built=0
skipped=0
for t in "${TARGETS[@]}"; do
    if ! rustup target list --installed 2>/dev/null | grep -qx "$t" \
        && ! rustup target add "$t" >/dev/null 2>&1; then
        echo "embedded: skipped $t: rustup target add failed"
        skipped=$((skipped + 1))
        continue
    fi
    cargo build --locked -q -p psp-core --no-default-features --features rustcrypto --target "$t"
    cargo check --locked -q -p psp-core --no-default-features --features rustcrypto,alloc --target "$t"
    echo "embedded: built psp-core for $t (rustcrypto; with alloc: checked)"
    built=$((built + 1))
done

(cd crates/psp-cortex-m && cargo fmt --check)

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=pass
(cd crates/psp-cortex-m && timeout 600 cargo run --locked -q --release) | tee "$log" || status=fail
grep -q '^psp-cortex-m: all checks passed' "$log" || status=fail
flash=$(sed -n 's/^memory: flash \([0-9]*\) B.*/\1/p' "$log")
stack=$(sed -n 's/.*stack peak \([0-9]*\) B.*/\1/p' "$log")
echo "RESULT targets_built=$built targets_skipped=$skipped cortex_m_checks=$status flash_bytes=${flash:-0} stack_peak_bytes=${stack:-0}"
[[ $status == pass ]]
