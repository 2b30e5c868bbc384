#!/usr/bin/env bash
# Builds the libFuzzer targets of the read stage (not part of `swift test`) and runs each
# for a fixed time. Usage: Fuzz/run.sh [seconds per target, default 30] [line|gzip|jws|part ...]
# Needs a Swift toolchain with -sanitize=fuzzer (Linux toolchains have it) and zlib1g-dev; with
# libisal-dev too, the gzip target checks that zlib and ISA-L read every input alike.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
[ $# -gt 0 ] && shift
[ $# -eq 0 ] && set -- line gzip jws part
out=.build/fuzz
mkdir -p "$out"

# Everything the decoder and the gzip reader use, and nothing that needs swift-crypto. The files
# come from several of the package's targets but are built here as one module: the targets'
# `import WinBack...` lines resolve to empty stand-ins, and `-package-name` lets `package`
# declarations compile.
sources=(
    Sources/WinBackRead/Read/JSONLineScanner.swift Sources/WinBackRead/Read/JSONArrayElements.swift
    Sources/WinBackRead/Read/TransactionDecoder.swift Sources/WinBackRead/Read/LineCursor.swift
    Sources/WinBackRead/Read/Whitespace.swift
    Sources/WinBackRead/Read/ByteSource.swift Sources/WinBackRead/Read/GzipFileSource.swift
    Sources/WinBackModel/StringTable.swift Sources/WinBackModel/Identifier.swift
    Sources/WinBackModel/Transaction.swift Sources/WinBackModel/TransactionKey.swift
    Sources/WinBackModel/AppAccountToken.swift Sources/WinBackModel/Digits.swift
    Sources/WinBackModel/JSONValue.swift
    Sources/WinBackSupport/WinBackError.swift Sources/WinBackSupport/ControlEscape.swift
    Sources/WinBackSupport/System.swift Sources/WinBackSupport/Hex.swift
    Sources/WinBackRead/Read/Reject.swift Sources/WinBackWrite/OutputFile.swift Sources/WinBackWrite/DiskSync.swift
)
# What the JWS target needs: the signed-line pieces that neither verify nor decode rows.
jws_sources=(
    Sources/WinBackRead/Read/JSONLineScanner.swift Sources/WinBackRead/Read/JSONArrayElements.swift
    Sources/WinBackRead/Read/Whitespace.swift
    Sources/WinBackModel/StringTable.swift Sources/WinBackModel/Digits.swift
    Sources/WinBackSupport/ControlEscape.swift Sources/WinBackRead/Signed/Base64URL.swift
    Sources/WinBackRead/Signed/CompactJWS.swift
)
# The part-file reader: the read sources, and the part file and row codec of Shard/.
part_sources=(
    "${sources[@]}" Sources/WinBack/Shard/PartFile.swift Sources/WinBack/Shard/RowCodec.swift
)

for m in WinBackSupport WinBackModel WinBackRead WinBackWrite; do
    : > "$out/$m.swift"
    swiftc -parse-as-library -module-name "$m" -emit-module -emit-module-path "$out/$m.swiftmodule" "$out/$m.swift"
done
swiftc -parse-as-library -module-name Crypto -emit-module -emit-module-path "$out/Crypto.swiftmodule" \
    -c Fuzz/CryptoStub.swift -o "$out/Crypto.o"

make_seeds() {
    local dir="$1" kind="$2"
    mkdir -p "$dir"
    local lines=(
        '{"transactionId":"1000000000000001","originalTransactionId":"1000000000000001","subscriptionGroupIdentifier":"21482345","productId":"com.example.pass.monthly","purchaseDate":1700000000000,"expiresDate":1702592000000,"type":"Auto-Renewable Subscription","environment":"Production","storefront":"USA","signedDate":1700000000000,"offerType":4,"offerIdentifier":"wb.a","offerDiscountType":"FREE_TRIAL","appAccountToken":"7e3fb20b-4cdb-47cc-936d-99d65f608138"}'
        '{"note":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/","meta":{"a":[1,-2.5e-3,true,null]},"transactionId":"10\u0030","originalTransactionId":"o","subscriptionGroupIdentifier":"g","productId":"p","purchaseDate":0,"expiresDate":1}'
        '{"type":"Consumable","transactionId":"n1"}'
    )
    local i=0
    if [ "$kind" = part ]; then
        # Written by the target itself with PartWriter (WINBACK_FUZZ_PART_SEEDS).
        return
    fi
    if [ "$kind" = jws ]; then
        # A real App Store JWS, a bare header and payload, and a page of strings.
        cp Tests/WinBackTests/Fixtures/signed/apple-sandbox-transaction.jws "$dir/seed-apple"
        printf '%s' 'eyJhbGciOiJFUzI1NiIsIng1YyI6WyJBQUFBIiwiQkJCQiIsIkNDQ0MiXX0.eyJ0cmFuc2FjdGlvbklkIjoiMSJ9.AAAA' > "$dir/seed-small"
        printf '%s' '["eyJ.eyJ.sig", {"b": ["]", "\""]}, 1.5e3, null, [[]]]' > "$dir/seed-array"
        return
    fi
    for l in "${lines[@]}"; do
        i=$((i + 1))
        if [ "$kind" = line ]; then
            printf '%s' "$l" > "$dir/seed$i"
        else
            printf '%s\r\n\n%s\n' "$l" "$l" | gzip -n > "$dir/seed$i"
            { printf '%s\n' "$l" | gzip -n; printf '%s' "$l" | gzip -n; } > "$dir/multi$i"
        fi
    done
}

for t in "$@"; do
    case "$t" in
        line) entry=Fuzz/FuzzLine.swift files=("${sources[@]}") ;;
        gzip) entry=Fuzz/FuzzGzip.swift files=("${sources[@]}") ;;
        jws) entry=Fuzz/FuzzJWS.swift files=("${jws_sources[@]}") ;;
        part) entry=Fuzz/FuzzPart.swift files=("${part_sources[@]}") ;;
        *) echo "unknown target $t (line, gzip, jws, part)" >&2; exit 64 ;;
    esac
    echo "== building fuzz-$t"
    swiftc -parse-as-library -O -g -sanitize=fuzzer,address -module-name WinBackFuzz -package-name winback \
        -I "$out" -I Sources/CZlib -I Sources/CIsal -I Sources/CWinBackShims "$out/Crypto.o" -lz \
        "${files[@]}" "$entry" -o "$out/fuzz-$t" 2> "$out/build-$t.log" \
        || { cat "$out/build-$t.log" >&2; exit 1; }
    corpus="$out/corpus-$t"
    make_seeds "$corpus" "$t"
    echo "== running fuzz-$t for ${seconds}s"
    if WINBACK_FUZZ_PART_SEEDS="$corpus" "$out/fuzz-$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -artifact_prefix="$out/crash-$t-" "$corpus" > "$out/run-$t.log" 2>&1; then
        grep -E '^Done [0-9]+ runs' "$out/run-$t.log"
    else
        tail -n 40 "$out/run-$t.log" >&2
        echo "fuzz-$t failed; the input is in $out/crash-$t-*" >&2
        exit 1
    fi
done
