#!/bin/sh
# Writes the nginx configuration for a Tessera fleet: tessera.conf.in with the replicas, listen address and
# limits filled in. Usage:
#   render.sh --replica HOST:PORT [--replica HOST:PORT ...] [--listen [ADDR:]PORT] [--max-body-bytes N]
#             [--read-timeout SECONDS] [--access-log PATH] [--max-fails N] [--fail-timeout SECONDS] [-o FILE]
# --max-body-bytes must be the replicas' --max-body-bytes (1048576 is their default).
set -eu
here=$(cd "$(dirname "$0")" && pwd)

listen=8080
max_body=1048576
read_timeout=3600
access_log=/var/log/nginx/tessera.access.log
max_fails=3
fail_timeout=10
out=-
replicas=""

die() { echo "render.sh: $*" >&2; exit 2; }
number() { case "$2" in '' | *[!0-9]*) die "$1 wants a whole number, got '$2'" ;; esac; }

while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "$1 needs a value"
  case "$1" in
    --replica)
      case "$2" in
        *[!A-Za-z0-9.:_\[\]-]* | *:) die "--replica wants HOST:PORT, got '$2'" ;;
        *:*) number --replica "${2##*:}" ;;
        *) die "--replica wants HOST:PORT, got '$2'" ;;
      esac
      replicas="$replicas $2" ;;
    --listen)
      case "$2" in *[!A-Za-z0-9.:_\[\]-]* | '') die "--listen wants [ADDR:]PORT, got '$2'" ;; esac
      listen=$2 ;;
    --max-body-bytes) number "$1" "$2"; max_body=$2 ;;
    --read-timeout) number "$1" "$2"; read_timeout=$2 ;;
    --max-fails) number "$1" "$2"; max_fails=$2 ;;
    --fail-timeout) number "$1" "$2"; fail_timeout=$2 ;;
    --access-log)
      case "$2" in *[\;\ \'\"]* | '') die "--access-log wants a path without spaces, quotes or ';'" ;; esac
      access_log=$2 ;;
    -o) out=$2 ;;
    *) die "unknown option '$1'" ;;
  esac
  shift 2
done
[ -n "$replicas" ] || die "give at least one --replica HOST:PORT"

# max_fails failures within fail_timeout take a replica out for fail_timeout; nginx then tries it again.
servers=$(for r in $replicas; do
  printf '    server %s max_fails=%s fail_timeout=%ss;\\n' "$r" "$max_fails" "$fail_timeout"
done)

render() {
  awk -v servers="$servers" '$0 == "@REPLICAS@" { printf "%s", servers; next } { print }' "$here/tessera.conf.in" |
    sed -e "s|@LISTEN@|$listen|g" -e "s|@MAX_BODY_BYTES@|$max_body|g" -e "s|@READ_TIMEOUT@|${read_timeout}s|g" \
        -e "s|@ACCESS_LOG@|$access_log|g"
}
if [ "$out" = - ]; then render; else render > "$out"; fi
