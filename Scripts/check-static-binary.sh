#!/usr/bin/env bash
# The release binary runs on a host without the Swift toolchain (README, the install at the
# top): built as README's install builds it (the Swift runtime and Foundation linked
# statically), installed under a temporary prefix, it must need no library of the toolchain
# (ldd), and `run` and `validate` on the committed sample must succeed with the toolchain's
# folder hidden (a private mount namespace with an empty tmpfs over it). Needs root (unshare -m,
# mount). Exits non-zero when any check fails.
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

# 2. With the toolchain hidden, the installed binary runs the sample and validates it. The
# namespace's own view is checked first, so that a mount that hid nothing cannot pass.
out="$work/out"
unshare -m sh -euc '
    mount -t tmpfs none "$1"
    if [ -e "$2/libswiftCore.so" ]; then echo "the toolchain is still visible at $2" >&2; exit 1; fi
    "$3" run Pipelines/sample.yaml --output "$4" --quiet
    "$3" validate Pipelines/sample.yaml
' sh "$hide" "$runtime" "$bin" "$out" || fail "the installed binary did not run the sample with $hide hidden"
test -s "$out/sample/latest/segments/best-offer.csv" || fail "the run published no best-offer segment"
test -s "$out/sample/latest/manifest.json" || fail "the run published no manifest"
echo "check-static-binary: ok: $bin needs no toolchain library and runs the sample with $hide hidden"
