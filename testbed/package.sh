#!/usr/bin/env bash
# testbed/package.sh: build the psp-gateway Debian package.
#
# 1. psp-gateway-gen writes the man pages (section 1 from the clap definitions, psp-gateway.toml(5)
#    from docs/CONFIG.md) and completions into
#    TARGET/PROFILE/generated/ (where [package.metadata.deb] assets look for them);
# 2. cargo build the binary, then cargo deb -p psp-gateway --no-build packs it with them, the
#    unit, the sysusers.d file and /etc/psp/gateway.toml.
#
# Usage: testbed/package.sh [--dev]     (as any user; installs cargo-deb when missing)
#   --dev   the dev profile (a debug binary, a quick build; what psp-gateway/tests/package.rs
#           uses); default: the release profile (LTO, slow)
# Prints the path of the .deb on its last line. Exit non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "package: error: $*" >&2; exit 1; }

profile=release
profile_dir=release
case "${1:-}" in
    "") ;;
    --dev) profile=dev; profile_dir=debug ;;
    *) die "usage: testbed/package.sh [--dev]" ;;
esac

if ! command -v cargo-deb >/dev/null 2>&1; then
    echo "package: installing cargo-deb" >&2
    cargo install cargo-deb --version 3.8.0 --locked >&2 || die "cargo install cargo-deb failed"
fi

target_dir="$(cargo metadata --format-version 1 --no-deps --locked |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
[[ -n $target_dir ]] || die "cannot find cargo's target directory"
generated="$target_dir/$profile_dir/generated"

# Stale pages of a removed subcommand must not be packaged: start from an empty directory.
rm -rf "$generated"
cargo run --locked --quiet --profile "$profile" -p psp-gateway --bin psp-gateway-gen -- \
    "$generated" >&2 || die "psp-gateway-gen failed"
# Debian wants man pages gzipped; cargo-deb compresses only assets it does not consider built
# (and everything under target/release/ counts as built). -n: no name or time, reproducible.
gzip -9n "$generated"/man/*.1 "$generated"/man/*.5

# The binary, built here so that cargo deb need not: the man page glob in the assets would make
# it build the whole workspace.
cargo build --locked --quiet --profile "$profile" -p psp-gateway --bin psp-gateway >&2 ||
    die "cargo build failed"
out="$target_dir/debian"
deb="$(cargo deb --locked -p psp-gateway --profile "$profile" --no-build --output "$out" --fast |
    tail -n 1)"
[[ -f $deb ]] || die "cargo deb produced no package (last line: $deb)"
echo "$deb"
