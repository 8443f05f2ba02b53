#!/usr/bin/env bash
# Starts a local PostgreSQL for the lineage tests and prints its SQLAlchemy URL as the last line.
#
# Installs Debian's `postgresql` with apt-get if no server binaries are found (needs root),
# runs a private cluster with its data under ${EVOLVE_PG_DATA:-/tmp/evolve-pg} listening on
# 127.0.0.1:${EVOLVE_PG_PORT:-5432} only (or the next free port), and creates the role and database `evolve` /
# `evolve_test`. Idempotent: a second run finds the server up and only re-checks.
# Use:  export EVOLVE_TEST_PG_URL=$(bash scripts/start_postgres.sh | tail -n 1)
set -euo pipefail
PORT=${EVOLVE_PG_PORT:-5432}
DATA=${EVOLVE_PG_DATA:-/tmp/evolve-pg}
ROLE=evolve PASSWORD=evolve DB=evolve_test
die() { echo "start_postgres: $*" >&2; exit 1; }

find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
BIN=$(find_bin)
if [ -z "$BIN" ]; then
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || die "no PostgreSQL found and cannot apt-get install it"
  echo "start_postgres: installing postgresql from Debian packages" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
    || die "apt-get install postgresql failed"
  BIN=$(find_bin)
  [ -n "$BIN" ] || die "postgresql installed but no server binaries under /usr/lib/postgresql"
fi

# The server refuses to run as root: run it as the `postgres` user when we are root.
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
  as_pg() { runuser -u postgres -- "$@"; }
else
  as_pg() { "$@"; }
fi
SOCK="$DATA/socket"

# Our server may already be up (idempotent); a port held by another server (Debian's own
# cluster, started by apt) is skipped for the next free one.
RUNNING=
for p in $(seq "$PORT" $((PORT + 9))); do
  if [ -S "$SOCK/.s.PGSQL.$p" ] && "$BIN/pg_isready" -q -h 127.0.0.1 -p "$p"; then PORT=$p; RUNNING=1; break; fi
  "$BIN/pg_isready" -q -h 127.0.0.1 -p "$p" >/dev/null 2>&1 && continue
  PORT=$p
  break
done
URL="postgresql+psycopg://$ROLE:$PASSWORD@127.0.0.1:$PORT/$DB"

if [ -z "$RUNNING" ]; then
  if [ ! -f "$DATA/PG_VERSION" ]; then
    mkdir -p "$DATA"
    [ "$(id -u)" = 0 ] && chown postgres: "$DATA"
    as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
      --encoding=UTF8 --locale=C.UTF-8 >"$DATA.initdb.log" 2>&1 \
      || { cat "$DATA.initdb.log" >&2; die "initdb failed"; }
  fi
  as_pg mkdir -p "$SOCK"
  as_pg "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w -t 60 \
    -o "-p $PORT -c listen_addresses=127.0.0.1 -k $SOCK -c fsync=off" start >/dev/null \
    || { tail -n 20 "$DATA/server.log" >&2 || true; die "pg_ctl start failed on port $PORT"; }
fi

psql_su() { as_pg "$BIN/psql" -h "$SOCK" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -tAq "$@"; }
[ "$(psql_su -c "SELECT 1 FROM pg_roles WHERE rolname='$ROLE'")" = 1 ] \
  || psql_su -c "CREATE ROLE $ROLE LOGIN CREATEDB PASSWORD '$PASSWORD'"
[ "$(psql_su -c "SELECT 1 FROM pg_database WHERE datname='$DB'")" = 1 ] \
  || psql_su -c "CREATE DATABASE $DB OWNER $ROLE"
PGPASSWORD=$PASSWORD "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U "$ROLE" -d "$DB" -tAq -c "SELECT 1" >/dev/null \
  || die "server is up but $ROLE cannot connect to $DB"
echo "start_postgres: PostgreSQL $("$BIN/postgres" --version | awk '{print $3}') at 127.0.0.1:$PORT, data in $DATA" >&2
echo "$URL"
