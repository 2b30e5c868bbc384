#!/usr/bin/env bash
# The release binary runs on a host without the Swift toolchain (README, the install at the
# top): built as README's install builds it (the Swift runtime and Foundation linked
# statically), installed under a temporary prefix, it must need no library of the toolchain
# (ldd), and `run` and `validate` on the committed sample must succeed with the toolchain's
# folder hidden (a private mount namespace with an empty tmpfs over it). libcurl is loaded only
# when a run speaks to S3: ldd must not list it, the sample must run with it hidden too, and an
# `s3://` input must then fail as a configuration error (78) saying what to install. Needs root
# (unshare -m, mount). Exits non-zero when any check fails.
#
#   Scripts/check-static-binary.sh             build (under the build lock), install, check
#   Scripts/check-static-binary.sh --no-build  check the release binary already built
#   Scripts/check-static-binary.sh --binary F  check executable F instead (no build)
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
built=.build/release/winback
case "${1:-}" in
    --no-build) build=0 ;;
    --binary)
        build=0
        built=${2:?--binary needs a path}
        ;;
    "") ;;
    *) echo "usage: $0 [--no-build | --binary FILE]" >&2; exit 64 ;;
esac

fail() { echo "check-static-binary: FAIL: $*" >&2; exit 1; }

# The toolchain: <root>/usr/bin/swift → <root>/usr; its runtime libraries are in usr/lib/swift.
swift_bin=$(readlink -f "$(command -v swift)") || fail "swift is not on PATH"
toolchain_usr=$(dirname "$(dirname "$swift_bin")")
runtime="$toolchain_usr/lib/swift/linux"
[ -e "$runtime/libswiftCore.so" ] || fail "no Swift runtime at $runtime (toolchain at $toolchain_usr?)"
# The folder hidden: the toolchain's own root (/opt/swift), or only its Swift library folder
# when the toolchain is installed into the system's /usr.
hide=$(dirname "$toolchain_usr")
case "$hide" in
    / | /usr | /usr/local) hide="$toolchain_usr/lib/swift" ;;
esac

if ((build)); then
    # One build at a time in a shared tree: the release build takes the build lock too.
    flock -x /tmp/winback-build.lock swift build -c release --static-swift-stdlib --product winback
fi
[ -x "$built" ] || fail "$built is missing (build it with: swift build -c release --static-swift-stdlib --product winback)"

work=$(mktemp -d /tmp/winback-static.XXXXXX)
trap 'rm -rf "$work"' EXIT
# Installed as README says, without sudo: install(1) into a prefix's bin.
install -D -m 0755 "$built" "$work/prefix/bin/winback"
bin="$work/prefix/bin/winback"

# 1. ldd lists no library of the toolchain, no Swift or Foundation library, nothing missing.
libs=$(ldd "$bin") || fail "ldd cannot read $bin"
echo "$libs"
if grep -F -e "$toolchain_usr" -e "$hide" <<<"$libs"; then fail "the binary loads libraries from the toolchain"; fi
if grep -E 'libswift|libFoundation|lib_Foundation|libdispatch|libBlocksRuntime' <<<"$libs"; then
    fail "the binary needs the Swift runtime or Foundation as shared libraries"
fi
if grep -F 'not found' <<<"$libs"; then fail "a library the binary needs is missing"; fi
if grep -F 'libcurl' <<<"$libs"; then fail "libcurl is linked: it must be loaded only when a run speaks to S3"; fi
curl=$(readlink -f "$(ldconfig -p | awk '$1 == "libcurl.so.4" && !found { print $NF; found = 1 }')") \
    || fail "libcurl.so.4 is not installed: the check of S3 without it needs it there to hide"
[ -f "$curl" ] || fail "libcurl.so.4 is not installed: the check of S3 without it needs it there to hide"

# 2. With the toolchain and libcurl hidden (an empty file bound over libcurl), the installed
# binary runs the sample and validates it; a pipeline reading s3:// fails with 78, saying why.
# The namespace's own view is checked first, so that a mount that hid nothing cannot pass.
out="$work/out"
printf '%s\n' 'name: remote' 'transactions:' '  format: appstore-ndjson' '  paths: ["s3://bucket/t.jsonl.gz"]' \
    "offers: $PWD/Data/sample/offers.json" 'asOf: 2026-11-22T00:00:00Z' "output: { directory: $work/remote-out }" \
    >"$work/remote.yaml"
: >"$work/empty"
unshare -m sh -euc '
    mount -t tmpfs none "$1"
    mount --bind "$6" "$5"
    if [ -e "$2/libswiftCore.so" ]; then echo "the toolchain is still visible at $2" >&2; exit 1; fi
    if [ -s "$5" ]; then echo "libcurl is still visible at $5" >&2; exit 1; fi
    "$3" run Pipelines/sample.yaml --output "$4" --quiet
    "$3" validate Pipelines/sample.yaml
    status=0
    AWS_ACCESS_KEY_ID=a AWS_SECRET_ACCESS_KEY=b AWS_REGION=us-east-1 "$3" run "$7" --quiet 2>"$8" || status=$?
    if [ "$status" != 78 ]; then echo "an s3:// run without libcurl exited $status, not 78:" >&2; cat "$8" >&2; exit 1; fi
' sh "$hide" "$runtime" "$bin" "$out" "$curl" "$work/empty" "$work/remote.yaml" "$work/remote.err" \
    || fail "the installed binary did not run the sample with $hide and libcurl hidden"
test -s "$out/sample/latest/segments/best-offer.csv" || fail "the run published no best-offer segment"
test -s "$out/sample/latest/manifest.json" || fail "the run published no manifest"
grep -F "s3:// needs libcurl (libcurl.so.4), which could not be loaded" "$work/remote.err" \
    && grep -F "install libcurl4" "$work/remote.err" \
    || { cat "$work/remote.err" >&2; fail "an s3:// run without libcurl does not say what to install"; }
echo "check-static-binary: ok: $bin needs no toolchain library nor libcurl, runs the sample with $hide and libcurl hidden, and says what s3:// needs"
