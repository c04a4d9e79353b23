# A PostgreSQL server of a benchmark's own, for scripts that source this file: Debian's
# postgresql-15 (initdb and pg_ctl) on a free loopback port, its files under "$dir/pg", run as the
# postgres user when run as root. The caller sets $dir (an existing folder) and $python (for
# finding a free port) before start_postgres; after it, $db is the server's URL and $pg_port its
# port. stop_postgres stops it (and is harmless when none runs).
pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -1)"
pg_as=()
(( EUID == 0 )) && pg_as=(runuser -u postgres --)
pg_port=""
start_postgres() {
  [[ -x "$pg_bin/initdb" ]] || { echo "$(basename "$0"): no initdb: install postgresql-15" >&2; exit 2; }
  mkdir -p "$dir/pg" && chmod 777 "$dir" "$dir/pg"
  pg_port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  "${pg_as[@]}" "$pg_bin/initdb" -D "$dir/pg/data" -U hp --auth=trust -E UTF8 --no-sync \
    --locale=C > "$dir/pg/initdb.log" 2>&1 || { cat "$dir/pg/initdb.log" >&2; exit 2; }
  "${pg_as[@]}" "$pg_bin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $dir/pg" start > /dev/null ||
    { cat "$dir/pg/log" >&2; exit 2; }
  db="postgresql://hp@127.0.0.1:$pg_port/postgres"
}
stop_postgres() {
  [[ -n "$pg_port" ]] && "${pg_as[@]}" "$pg_bin/pg_ctl" -D "$dir/pg/data" -m fast -w stop \
    > /dev/null 2>&1
  pg_port=""
}
