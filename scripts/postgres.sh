#!/usr/bin/env bash
# A throwaway Postgres server on loopback for the Postgres and fleet tests.
#   scripts/postgres.sh start DIR   initdb under DIR (as the postgres user when run as root), start on a free port,
#                                   print the connection URL on stdout (also written to DIR/url)
#   scripts/postgres.sh stop DIR    stop it and delete DIR
# Exits 3 (printing why on stderr) when this machine has no Postgres server binaries.
set -euo pipefail
cmd=${1:?start|stop}; dir=${2:?data directory}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$bin" ] && command -v pg_ctl >/dev/null 2>&1; then bin=$(dirname "$(command -v pg_ctl)"); fi
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then echo "postgres.sh: no Postgres server (initdb, pg_ctl) on this machine" >&2; exit 3; fi
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$cmd" in
  start)
    mkdir -p "$dir"; [ "$(id -u)" = 0 ] && chown postgres "$dir"
    port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
    as_pg "$bin/initdb" -D "$dir/data" -U lifeline --auth=trust -E UTF8 --no-instructions >"$dir/initdb.log" 2>&1
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null
    url="postgres://lifeline@127.0.0.1:$port/postgres"
    echo "$url" | as_pg tee "$dir/url" >/dev/null
    echo "$url"
    ;;
  stop)
    [ -d "$dir/data" ] && as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
