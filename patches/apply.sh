#!/usr/bin/env bash
# Builds upstream's `mistralrs` binary (crate mistralrs-cli) with HLG linked in by the
# series in patches/mistralrs-cli-<version>/, and prints the binary's path.
#
#   patches/apply.sh [VERSION]            unpack, patch, build (release; ~40 min the
#                                         first time on 2 cores: a separate build of
#                                         mistral.rs)
#   patches/apply.sh [VERSION] --check    only verify that the series applies (seconds)
#   patches/apply.sh [VERSION] --upstream build the same crate unpatched, with the same
#                                         lock file: the reference the patched binary is
#                                         compared with
#
# VERSION is 0.8.1 (the default) or 0.9.2.
#
# 0.8.1: the crate comes from the cargo registry cache, or from crates.io (checked against
# the pinned sha256). It is unpacked under $MISTRALRS_HLG_CLI_DIR (default
# ~/.cache/mistralrs-hlg/cli) beside a link named `mistralrs-hlg` to this repository,
# which the series' path dependency points at, and built with its own Cargo.lock (the
# one upstream published, plus this crate) into $MISTRALRS_HLG_CLI_TARGET_DIR (default
# ~/.cache/mistralrs-hlg/cli-target; not $CARGO_TARGET_DIR, which holds the workspace's
# own build with other versions of the same crates).
#
# 0.9.2 (GitHub only; the sources in ../shared/upstream): scripts/host-workspace lays out
# the upstream workspace with the series applied to its mistralrs-cli, and a copy of
# this repository on that workspace's crates, which the series' path dependency points
# at; the binary is built in that workspace into the target directory of
# scripts/test-upstream 0.9.2, whose build of mistral.rs it shares where the features
# agree. Bumping upstream: see "Upstream bumps" in CONTRIBUTING.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# The CPU's SIMD, as the workspace builds with it (its .cargo/config.toml, which does not
# reach a crate built outside the repository): candle's quantized kernels are scalar
# without AVX2. x86-64-v3, not target-cpu=native: see "SIMD build" in docs/NOTES.md.
simd=""
[[ $(uname -m) == x86_64 ]] && simd="-C target-cpu=x86-64-v3"

# A version released on GitHub only: built from the shared sources (see the header).
from_sources() { # VERSION MODE
  local version=$1 mode=$2 series="$root/patches/mistralrs-cli-$1"
  local sources=${MISTRALRS_HLG_UPSTREAM_SOURCES:-$root/../shared/upstream}
  if [[ $mode == check ]]; then
    local p
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    cp -r "$sources/mistral.rs-$version/mistralrs-cli" "$work/mistralrs-cli"
    for p in "$series"/*.patch; do
      patch -d "$work/mistralrs-cli" -p1 --forward --quiet --no-backup-if-mismatch < "$p" \
        || { echo "apply.sh: $(basename "$p") does not apply to mistralrs-cli $version" >&2; exit 1; }
    done
    grep -q 'path = "../../mistralrs-hlg"' "$work/mistralrs-cli/Cargo.toml" || { echo "apply.sh: the series does not link mistralrs-hlg" >&2; exit 1; }
    echo "apply.sh: $(ls "$series"/*.patch | wc -l) patch(es) apply cleanly to mistralrs-cli $version" >&2
    return
  fi
  local cli=() host
  [[ $mode == patched ]] && cli=(--cli)
  host=$("$root/scripts/host-workspace" "$version" ${cli[@]+"${cli[@]}"})
  local ws="$host/sources/mistral.rs-$version"
  # The unpatched build is --locked to upstream's lock file; the patched one adds this
  # crate (and only what it needs) to it, kept between runs.
  local locked=()
  if [[ $mode == upstream ]]; then
    locked=(--locked)
  elif [[ -f "$host/cli.Cargo.lock" ]]; then
    cp "$host/cli.Cargo.lock" "$ws/Cargo.lock"
  fi
  # The same flags as scripts/test-upstream's build (its .cargo/config.toml), so that the
  # crates both build with the same features are compiled once.
  # MISTRALRS_HLG_CLI_TARGET_DIR gives the binaries a target directory of their own (the
  # upstream lock's versions differ from the workspace's, so little is shared; a build
  # of the CLI then need not wait for scripts/test-upstream's lock on the directory).
  local target=${MISTRALRS_HLG_CLI_TARGET_DIR:-$host/target}
  (cd "$ws" && RUSTFLAGS="--cfg mistralrs_host=\"0.9\" $simd" CARGO_TARGET_DIR="$target" \
    cargo build --release "${locked[@]}" -p mistralrs-cli --bin mistralrs >&2)
  [[ $mode == patched ]] && cp "$ws/Cargo.lock" "$host/cli.Cargo.lock"
  local bin="$target/release/mistralrs"
  cp "$bin" "$bin-$mode.tmp"
  mv -f "$bin-$mode.tmp" "$bin-$mode"
  echo "$bin-$mode"
}

version=0.8.1
if [[ "${1:-}" =~ ^[0-9] ]]; then version=$1; shift; fi

mode=patched
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  --upstream) mode=upstream ;;
  *) echo "usage: patches/apply.sh [0.8.1 | 0.9.2] [--check | --upstream]" >&2; exit 2 ;;
esac

case "$version" in
  0.8.1) sha256=26bc2a0267ea22fa09eb61c6e78257f58d2704671c9666527ccb91a29275939c ;;
  0.9.2) from_sources "$version" "$mode"; exit 0 ;;
  *) echo "apply.sh: no series for mistralrs-cli $version (0.8.1, 0.9.2)" >&2; exit 2 ;;
esac

series="$root/patches/mistralrs-cli-$version"
base=${MISTRALRS_HLG_CLI_DIR:-$HOME/.cache/mistralrs-hlg/cli}
mkdir -p "$base"

# The pinned crate: the registry cache if cargo has it, else a checked download.
crate=$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/mistralrs-cli-$version.crate 2>/dev/null | head -1 || true)
if [[ -z "$crate" ]]; then
  crate="$base/mistralrs-cli-$version.crate"
  if [[ ! -f "$crate" ]]; then
    curl -sSfL -o "$crate.part" "https://static.crates.io/crates/mistralrs-cli/mistralrs-cli-$version.crate"
    mv "$crate.part" "$crate"
  fi
fi
if [[ "$(sha256sum "$crate" | cut -d' ' -f1)" != "$sha256" ]]; then
  echo "apply.sh: $crate does not have the pinned sha256 $sha256" >&2
  exit 1
fi

unpack() { # DIR: a fresh copy of the crate in DIR
  rm -rf "$1"
  mkdir -p "$1"
  tar -xzf "$crate" -C "$1" --strip-components=1
}

apply_series() { # DIR
  local p
  for p in "$series"/*.patch; do
    if ! patch -d "$1" -p1 --forward --quiet --no-backup-if-mismatch < "$p"; then
      echo "apply.sh: $(basename "$p") does not apply to mistralrs-cli $version (see \"Upstream bumps\" in CONTRIBUTING.md)" >&2
      exit 1
    fi
  done
}

if [[ $mode == check ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  unpack "$work/mistralrs-cli"
  apply_series "$work/mistralrs-cli"
  grep -q 'path = "../mistralrs-hlg"' "$work/mistralrs-cli/Cargo.toml" || { echo "apply.sh: the series does not link mistralrs-hlg" >&2; exit 1; }
  echo "apply.sh: $(ls "$series"/*.patch | wc -l) patch(es) apply cleanly to mistralrs-cli $version" >&2
  exit 0
fi

dir="$base/$mode"
# Re-unpack only when the series (or the mode) changed: cargo fingerprints a path package
# by its files' times, so a fresh copy would recompile the crate every time.
stamp=$( { echo "$version $mode"; if [[ $mode == patched ]]; then cat "$series"/*.patch; fi; } | sha256sum | cut -d' ' -f1)
if [[ ! -f "$dir/.hlg-series" || "$(cat "$dir/.hlg-series")" != "$stamp" ]]; then
  unpack "$dir"
  if [[ $mode == patched ]]; then apply_series "$dir"; fi
  echo "$stamp" > "$dir/.hlg-series"
fi
ln -sfn "$root" "$base/mistralrs-hlg"

export CARGO_TARGET_DIR=${MISTRALRS_HLG_CLI_TARGET_DIR:-$HOME/.cache/mistralrs-hlg/cli-target}
# The upstream build is --locked to the published lock file; the patched one adds this
# crate (and only what it needs) to that lock.
locked=()
[[ $mode == upstream ]] && locked=(--locked)
(cd "$dir" && RUSTFLAGS="${RUSTFLAGS:-$simd}" cargo build --release "${locked[@]}" --bin mistralrs >&2)
bin="$CARGO_TARGET_DIR/release/mistralrs"
# Both builds write target/release/mistralrs: keep each under its own name (copied, then
# renamed over the old one, which may be running).
cp "$bin" "$CARGO_TARGET_DIR/release/mistralrs-$mode.tmp"
mv -f "$CARGO_TARGET_DIR/release/mistralrs-$mode.tmp" "$CARGO_TARGET_DIR/release/mistralrs-$mode"
echo "$CARGO_TARGET_DIR/release/mistralrs-$mode"
