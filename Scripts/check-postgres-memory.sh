#!/usr/bin/env bash
# PostgreSQL within the memory limit (docs/rules.md §14.1): a 200,000-customer world loaded by
# `winback generate --postgres` into a PostgreSQL server this script starts on loopback (its own
# data folder, as a user other than root, stopped by its pid), read from its tables by the
# release binary under `--memory 64MB`: the peak (the maximum resident size /usr/bin/time
# reports) stays below 64,000,000 bytes, and the published segments, destinations and reports
# equal those of the same world read from its files in memory. Exits non-zero when a check fails.
#
#   Scripts/check-postgres-memory.sh                check .build/release/winback
#   Scripts/check-postgres-memory.sh --binary F     check executable F
# WINBACK_PG_CUSTOMERS sets the world's size (default 200000).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=.build/release/winback
case "${1:-}" in
    --binary) bin=${2:?--binary needs a path} ;;
    "") ;;
    *) echo "usage: $0 [--binary FILE]" >&2; exit 64 ;;
esac
fail() { echo "check-postgres-memory: FAIL: $*" >&2; exit 1; }
[ -x "$bin" ] || fail "$bin is missing (build it with: swift build -c release --static-swift-stdlib --product winback)"
/usr/bin/time -f %M true >/dev/null 2>&1 || fail "/usr/bin/time is missing (Debian's time package)"
bin=$(readlink -f "$bin")
customers=${WINBACK_PG_CUSTOMERS:-200000}
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$pgbin" ] && [ -x "$pgbin/postgres" ] || fail "no PostgreSQL server (Debian: apt-get install postgresql)"
command -v psql >/dev/null || fail "no psql (Debian: apt-get install postgresql-client)"

work=$(mktemp -d /tmp/winback-pgmem.XXXXXX)
chmod 0755 "$work"
# The server refuses root: it runs as postgres (Debian's package makes the user), else nobody.
as=()
if [ "$(id -u)" = 0 ]; then
    user=postgres
    id postgres >/dev/null 2>&1 || user=nobody
    as=(setpriv --reuid="$user" --regid="$user" --init-groups)
    mkdir -m 0700 "$work/pg"
    chown "$user" "$work/pg"
else
    mkdir -m 0700 "$work/pg"
fi
pid=
stop() {
    if [ -n "$pid" ]; then
        kill -INT "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap stop EXIT

"${as[@]}" "$pgbin/initdb" -D "$work/pg/data" -U winback --auth=trust -E UTF8 --locale=C --no-sync >"$work/initdb.log" 2>&1 \
    || { cat "$work/initdb.log" >&2; fail "initdb failed"; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${as[@]}" "$pgbin/postgres" -D "$work/pg/data" -k "$work/pg" -h 127.0.0.1 -p "$port" -c fsync=off \
    -c synchronous_commit=off -c full_page_writes=off >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 150); do
    psql -X -q -At "postgresql://winback@127.0.0.1:$port/postgres" -c 'SELECT 1' >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/server.log" >&2; fail "the server did not start"; }
    sleep 0.2
done
psql -X -q "postgresql://winback@127.0.0.1:$port/postgres" -c 'CREATE DATABASE world' || fail "createdb failed"
uri="postgresql://winback@127.0.0.1:$port/world"

"$bin" generate --customers "$customers" --seed 5 --out "$work/w" --postgres "$uri" >"$work/generate.log" 2>&1 \
    || { tail -5 "$work/generate.log" >&2; fail "generate --postgres failed"; }
grep '^loaded' "$work/generate.log"
(cd "$work/w" && /usr/bin/time -f %M -o "$work/peak" "$bin" run postgres-pipeline.yaml --memory 64MB --quiet >/dev/null) \
    || fail "the run from PostgreSQL under --memory 64MB failed"
peak=$(($(tail -1 "$work/peak") * 1024))
echo "check-postgres-memory: a $customers-customer table under --memory 64MB: peak $peak bytes (limit 64000000)"
((peak < 64000000)) || fail "the run from PostgreSQL peaked at $peak bytes, not below 64000000"
(cd "$work/w" && "$bin" run pipeline.yaml --quiet >/dev/null) || fail "the run from the files failed"
for part in segments destinations reports; do
    diff -r "$work/w/out/generated/latest/$part" "$work/w/out-postgres/generated/latest/$part" >/dev/null \
        || fail "$part read from PostgreSQL under --memory 64MB differ from the files' run in memory"
done
rows=$(psql -X -q -At "$uri" -c 'SELECT count(*) FROM winback_world.audience')
[ "$rows" -gt 0 ] || fail "winback_world.audience is empty"
echo "check-postgres-memory: the same segments, destinations and reports; $rows rows in winback_world.audience"
