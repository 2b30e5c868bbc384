#!/usr/bin/env bash
# Memory limits hold at every size (docs/rules.md §6.2 and §8): the release binary runs a
# 20,000-customer world under `--memory 32MB` (as generated, and with a token and a price of
# its own on every row, which a run keeps once each), and ten thousand small files under
# `--memory 64MB` (and in memory under 128 MB), each peaking below its limit (the maximum resident size /usr/bin/time reports, code
# and libraries included), and publishes the same segments, destinations and reports as the
# run in memory. Exits non-zero when any check fails.
#
#   Scripts/check-memory-limits.sh                check .build/release/winback (build it first:
#                                                 swift build -c release --static-swift-stdlib)
#   Scripts/check-memory-limits.sh --binary F     check executable F
set -euo pipefail
cd "$(dirname "$0")/.."

bin=.build/release/winback
case "${1:-}" in
    --binary) bin=${2:?--binary needs a path} ;;
    "") ;;
    *) echo "usage: $0 [--binary FILE]" >&2; exit 64 ;;
esac
fail() { echo "check-memory-limits: FAIL: $*" >&2; exit 1; }
[ -x "$bin" ] || fail "$bin is missing (build it with: swift build -c release --static-swift-stdlib --product winback)"
/usr/bin/time -f %M true >/dev/null 2>&1 || fail "/usr/bin/time is missing (Debian's time package)"
bin=$(readlink -f "$bin")

work=$(mktemp -d /tmp/winback-memory.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Runs the pipeline in folder $1 with --memory $2 (bytes as winback reads them: 32MB is
# 32,000,000), then in memory, and compares what both published; with $5, the run in memory
# must peak below $5 bytes too.
bounded() {
    local dir=$1 limit=$2 bytes=$3 what=$4 unbounded=${5:-}
    (cd "$dir" && rm -rf out && /usr/bin/time -f %M -o "$work/peak" "$bin" run pipeline.yaml --memory "$limit" --quiet >/dev/null) \
        || fail "$what: the run under --memory $limit failed"
    local peak=$(($(tail -1 "$work/peak") * 1024))
    echo "check-memory-limits: $what under --memory $limit: peak $peak bytes (limit $bytes)"
    ((peak < bytes)) || fail "$what under --memory $limit peaked at $peak bytes, not below $bytes"
    mv "$dir/out" "$dir/bounded"
    (cd "$dir" && /usr/bin/time -f %M -o "$work/peak" "$bin" run pipeline.yaml --quiet >/dev/null) \
        || fail "$what: the run in memory failed"
    peak=$(($(tail -1 "$work/peak") * 1024))
    echo "check-memory-limits: $what in memory: peak $peak bytes"
    if [ -n "$unbounded" ]; then
        ((peak < unbounded)) || fail "$what in memory peaked at $peak bytes, not below $unbounded"
    fi
    local name
    name=$(ls "$dir/out")
    for part in segments destinations reports; do
        [ -d "$dir/out/$name/latest/$part" ] || continue
        diff -r "$dir/out/$name/latest/$part" "$dir/bounded/$name/latest/$part" >/dev/null \
            || fail "$what: $part under --memory $limit differ from the run in memory"
    done
}

# 1. The 20,000-customer world: identities, two destinations and money included.
"$bin" generate --customers 20000 --seed 3 --out "$work/w20k" >/dev/null
bounded "$work/w20k" 32MB 32000000 "a 20,000-customer world"

# 2. The same world with a token and a price of its own on every row: the columns a run keeps
# once for many rows (docs/architecture.md, CompactRow) are then one a row.
mkdir -p "$work/distinct"
find "$work/w20k" -maxdepth 1 -type f ! -name 'transactions-*' -exec cp {} "$work/distinct/" \;
python3 - "$work/w20k" "$work/distinct" <<'EOF'
import glob, gzip, os, random, re, sys, uuid
rng = random.Random(7)
token = re.compile(rb'"appAccountToken":\s*"[^"]*"')
price = re.compile(rb'"price":\s*[0-9]+')
for path in sorted(glob.glob(sys.argv[1] + "/transactions-*.jsonl.gz")):
    with gzip.open(path, "rb") as f:
        lines = f.readlines()
    out = []
    for line in lines:
        line = token.sub(b'"appAccountToken":"%s"' % str(uuid.UUID(int=rng.getrandbits(128))).encode(), line)
        out.append(price.sub(b'"price":%d' % rng.randrange(1, 10**9), line))
    with gzip.open(sys.argv[2] + "/" + os.path.basename(path), "wb") as f:
        f.writelines(out)
EOF
bounded "$work/distinct" 32MB 32000000 "the world with a token and a price a row"

# 3. Ten thousand small files: the first 49,052 rows of that world's exports, about five a file.
mkdir -p "$work/small/t"
python3 - "$work/w20k" "$work/small/t" <<'EOF'
import glob, gzip, sys
rows = []
for path in sorted(glob.glob(sys.argv[1] + "/transactions-*.jsonl.gz")):
    with gzip.open(path, "rb") as f:
        rows.extend(f.readlines()[: 49052 - len(rows)])
    if len(rows) >= 49052:
        break
for i in range(10000):
    with gzip.open("%s/tx-%05d.jsonl.gz" % (sys.argv[2], i), "wb") as f:
        f.writelines(rows[i * len(rows) // 10000 : (i + 1) * len(rows) // 10000])
EOF
cp "$work/w20k/offers.json" "$work/w20k/renewal-info.jsonl.gz" "$work/small/"
printf '%s\n' 'name: small-files' 'transactions:' '  format: appstore-ndjson' '  paths: ["t/tx-*.jsonl.gz"]' \
    'renewalInfo: ["renewal-info.jsonl.gz"]' 'offers: offers.json' 'asOf: 2026-11-22T00:00:00.000Z' \
    'output:' '  directory: out' >"$work/small/pipeline.yaml"
# In memory too: each file's tables (its strings, terms and tokens) are let go of as it is
# merged, so ten thousand files of five rows cost the run about 60 MB above its own.
bounded "$work/small" 64MB 64000000 "ten thousand small files" 128000000
echo "check-memory-limits: ok"
