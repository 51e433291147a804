#!/usr/bin/env bash
# Embedded OpenSearch test server for ragkit (see README.md).
#
#   services/opensearch/start.sh [start] [--nodes N] [--port PORT|auto]
#       builds if needed, starts in the background, waits until ready, then prints on stdout:
#       export RAG_TEST_OPENSEARCH_URL=http://127.0.0.1:PORT      (use: eval "$(services/opensearch/start.sh)")
#   services/opensearch/start.sh stop       stops it (its temp data folder is deleted)
#   services/opensearch/start.sh status     prints the export line if it runs, else exits 1
#
# Environment: RAG_OPENSEARCH_PORT (default 9200), RAG_OPENSEARCH_NODES (1), RAG_OPENSEARCH_HEAP
# (512m for 1 node, 1g for more), RAG_OPENSEARCH_TIMEOUT (180 s), RAG_OPENSEARCH_JAVA_HOME (a JDK >= 21),
# RAG_OPENSEARCH_CACHE (~/.cache/ragkit-opensearch: pid, log and stdout files).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RAG_OPENSEARCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ragkit-opensearch}
PIDFILE=$CACHE/opensearch.pid
LOG=$CACHE/opensearch.log
OUT=$CACHE/opensearch.out
MAIN=ragkit.opensearch.Launcher

say() { echo "[opensearch] $*" >&2; }

find_java_home() {
  local candidates=("${RAG_OPENSEARCH_JAVA_HOME:-}" /usr/lib/jvm/temurin-25-jdk-amd64 "${JAVA_HOME:-}")
  candidates+=(/usr/lib/jvm/temurin-2[1-9]* /usr/lib/jvm/java-2[1-9]-*)
  local jh ver
  for jh in "${candidates[@]}"; do
    [[ -n $jh && -x $jh/bin/java && -x $jh/bin/javac ]] || continue
    ver=$("$jh/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
    if [[ ${ver%%.*} -ge 21 ]]; then echo "$jh"; return; fi
  done
  say "no JDK >= 21 found (OpenSearch 3.x needs it); set RAG_OPENSEARCH_JAVA_HOME"; exit 1
}

running_pid() {  # pid of our launcher, if it is alive
  [[ -f $PIDFILE ]] || return 1
  local pid; pid=$(cat "$PIDFILE")
  [[ -n $pid ]] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "$MAIN" && echo "$pid"
}

print_url() { echo "export RAG_TEST_OPENSEARCH_URL=$(sed -n 's/^OPENSEARCH_URL=//p' "$OUT")"; }

build() {  # rebuild only when pom.xml or src/ changed; offline first, so a warm build downloads nothing
  local sum stamp=$HERE/target/.ragkit-build
  sum=$(cd "$HERE" && find pom.xml src -type f | sort | xargs sha256sum | sha256sum | cut -d' ' -f1)
  [[ -f $stamp && $(cat "$stamp") == "$sum" && -d $HERE/target/lib ]] && return
  say "building with Maven (offline when ~/.m2 has everything; a first build downloads ~130 MB)..."
  rm -rf "$HERE/target"  # stale jars or dependency-plugin markers would break the classpath
  # Maven 3.8's Jansi writes a colour reset (ESC[0m) to stdout and stderr at exit even in batch mode with
  # style.color=never; jansi.noreset stops it, and only as a JVM property (MAVEN_OPTS), not as a -D argument
  local mvn=(env "MAVEN_OPTS=${MAVEN_OPTS:+$MAVEN_OPTS }-Djansi.noreset=true" mvn -q -B -Dstyle.color=never)
  if ! (cd "$HERE" && "${mvn[@]}" -o package > "$CACHE/build-offline.log" 2>&1); then
    (cd "$HERE" && "${mvn[@]}" package) >&2 || { say "Maven build failed"; exit 1; }
  fi
  echo "$sum" > "$stamp"
  rm -f "$CACHE"/cds-*.jsa
}

start() {
  local nodes=${RAG_OPENSEARCH_NODES:-1} port=${RAG_OPENSEARCH_PORT:-9200}
  while [[ $# -gt 0 ]]; do
    case $1 in
      --nodes) nodes=$2; shift 2 ;;
      --port) port=$2; shift 2 ;;
      *) say "unknown argument: $1"; exit 2 ;;
    esac
  done
  if running_pid > /dev/null && grep -q '^OPENSEARCH_URL=' "$OUT" 2>/dev/null; then
    say "already running (pid $(cat "$PIDFILE"))"; print_url; return
  fi
  export JAVA_HOME; JAVA_HOME=$(find_java_home)
  export PATH=$JAVA_HOME/bin:$PATH
  build
  local heap=${RAG_OPENSEARCH_HEAP:-$([[ $nodes -gt 1 ]] && echo 1g || echo 512m)}
  : > "$OUT"
  # AutoCreateSharedArchive: class-data archive written at the first exit, reused by later starts (faster start);
  # JVM log lines go to stderr so that stdout carries only the URL line
  setsid "$JAVA_HOME/bin/java" -Xms"$heap" -Xmx"$heap" -XX:+ExitOnOutOfMemoryError \
    -XX:+AutoCreateSharedArchive -XX:SharedArchiveFile="$CACHE/cds-$(cat "$HERE/target/.ragkit-build" | cut -c1-12).jsa" \
    -Xlog:disable -Xlog:all=warning:stderr -Xlog:cds*=off:stderr \
    --add-modules=jdk.incubator.vector --enable-native-access=ALL-UNNAMED \
    -Dlog4j.shutdownHookEnabled=false -Dlog4j2.disable.jmx=true -Dio.netty.allocator.numDirectArenas=0 \
    -cp "$HERE/target/ragkit-opensearch.jar:$HERE/target/lib/*" "$MAIN" "$port" --nodes "$nodes" \
    < /dev/null > "$OUT" 2> "$LOG" &
  local pid=$! t0=$SECONDS
  echo "$pid" > "$PIDFILE"
  say "started pid $pid ($nodes node(s), heap $heap), log: $LOG"
  while ! grep -q '^OPENSEARCH_URL=' "$OUT"; do
    if ! kill -0 "$pid" 2> /dev/null; then
      say "OpenSearch exited before it was ready; last log lines:"; tail -n 30 "$LOG" >&2; rm -f "$PIDFILE"; exit 1
    fi
    if (( SECONDS - t0 > ${RAG_OPENSEARCH_TIMEOUT:-180} )); then
      say "not ready after ${RAG_OPENSEARCH_TIMEOUT:-180} s; stopping it"; tail -n 30 "$LOG" >&2; stop; exit 1
    fi
    sleep 0.5
  done
  say "ready after $((SECONDS - t0)) s"
  print_url
}

stop() {
  local pid
  if ! pid=$(running_pid); then say "not running"; rm -f "$PIDFILE"; return 0; fi
  kill -TERM "$pid"
  for _ in $(seq 1 60); do kill -0 "$pid" 2> /dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2> /dev/null; then say "pid $pid did not stop in 30 s; killing it"; kill -KILL "$pid"; fi
  rm -f "$PIDFILE"
  say "stopped"
}

mkdir -p "$CACHE"
case ${1:-start} in
  start) shift || true; start "$@" ;;
  stop) stop ;;
  status) running_pid > /dev/null && print_url || { say "not running"; exit 1; } ;;
  --*) start "$@" ;;
  *) say "usage: $0 [start [--nodes N] [--port PORT|auto] | stop | status]"; exit 2 ;;
esac
