#!/usr/bin/env bash
# Makes sure a Redis answers on 127.0.0.1:6379: starts redis-server when one is installed and none answers.
set -u
ping() {
  exec 3<>/dev/tcp/127.0.0.1/6379 2>/dev/null || return 1
  printf 'PING\r\n' >&3
  local reply=""
  read -r -t 2 reply <&3 || true
  exec 3<&- 3>&-
  [[ "$reply" == +PONG* ]]
}
ping && exit 0
if ! command -v redis-server >/dev/null 2>&1; then
  echo "ensure_redis: nothing answers on 127.0.0.1:6379 and redis-server is not installed (apt-get install redis-server)" >&2
  exit 1
fi
echo "ensure_redis: starting redis-server on 127.0.0.1:6379" >&2
redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
  --dir "${TMPDIR:-/tmp}" --logfile "${TMPDIR:-/tmp}/vsr-fast-redis.log"
for _ in $(seq 1 50); do
  ping && exit 0
  sleep 0.1
done
echo "ensure_redis: redis-server did not answer within 5 s (see ${TMPDIR:-/tmp}/vsr-fast-redis.log)" >&2
exit 1
