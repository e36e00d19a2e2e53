# shellcheck shell=bash
# Shared helpers for the strait scripts. Source it; do not run it.
#
# Sets (when not already set by the caller):
#   STRAIT_REPO_ROOT   the repository root, found from this file's own path
#   STRAIT_CACHE_DIR   downloads and compiled helpers (default <repo>/.cache)
#   STRAIT_TESTBED_DIR test-bed state: configs, data, logs, pid files, TLS (default <repo>/.testbed)
#   KAFKA_VERSION      read from scripts/kafka/pom.xml, so the pom is the one place to change it
#   KAFKA_HOME_DIR     $STRAIT_CACHE_DIR/kafka-$KAFKA_VERSION
#   KAFKA_LIBS_DIR     $KAFKA_HOME_DIR/libs, every runtime jar of broker, tools and MirrorMaker 2

STRAIT_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
STRAIT_CACHE_DIR="${STRAIT_CACHE_DIR:-$STRAIT_REPO_ROOT/.cache}"
STRAIT_TESTBED_DIR="${STRAIT_TESTBED_DIR:-$STRAIT_REPO_ROOT/.testbed}"
STRAIT_SCRIPTS_DIR="$STRAIT_REPO_ROOT/scripts"
STRAIT_KAFKA_CONF_DIR="$STRAIT_SCRIPTS_DIR/kafka"
STRAIT_POM="$STRAIT_KAFKA_CONF_DIR/pom.xml"

# One spelling per directory: relative paths would change meaning when a script cds, and the
# test bed recognises its brokers by the directory in their command line.
STRAIT_CACHE_DIR="$(realpath -m -- "$STRAIT_CACHE_DIR")"
STRAIT_TESTBED_DIR="$(realpath -m -- "$STRAIT_TESTBED_DIR")"

# Prints to stderr so that stdout stays clean for tools whose output is parsed.
strait_log() { printf '%s: %s\n' "${STRAIT_PROG:-strait}" "$*" >&2; }
strait_die() {
  printf '%s: error: %s\n' "${STRAIT_PROG:-strait}" "$*" >&2
  exit 1
}

strait_kafka_version() {
  local v
  v="$(sed -n 's:.*<kafka.version>\([^<]*\)</kafka.version>.*:\1:p' "$STRAIT_POM" | head -n 1)"
  [[ -n "$v" ]] || strait_die "cannot read <kafka.version> from $STRAIT_POM"
  printf '%s\n' "$v"
}

KAFKA_VERSION="$(strait_kafka_version)"
KAFKA_HOME_DIR="$STRAIT_CACHE_DIR/kafka-$KAFKA_VERSION"
KAFKA_LIBS_DIR="$KAFKA_HOME_DIR/libs"
KAFKA_FETCH_STAMP="$KAFKA_HOME_DIR/.fetched"

strait_sha256() { sha256sum "$@" | awk '{print $1}'; }

# The java to run: $JAVA_HOME/bin/java when JAVA_HOME is set (as Kafka's own scripts do), else PATH.
strait_java() {
  if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
    printf '%s\n' "$JAVA_HOME/bin/java"
  else
    command -v java || true
  fi
}

strait_javac() {
  if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/javac" ]]; then
    printf '%s\n' "$JAVA_HOME/bin/javac"
  else
    command -v javac || true
  fi
}

# Dies unless a Java 17+ runtime is available: Kafka's broker, tools and Connect need 17.
strait_require_java() {
  local java version major
  java="$(strait_java)"
  [[ -n "$java" ]] || strait_die "java not found: install a JDK 17 or newer (Debian: apt-get install openjdk-17-jdk-headless) or set JAVA_HOME"
  version="$("$java" -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n 1)"
  [[ -n "$version" ]] || strait_die "cannot tell the version of $java"
  major="${version%%.*}"
  # Java 8 and older report 1.x.
  if [[ "$major" == 1 ]]; then major="$(printf '%s' "$version" | cut -d. -f2)"; fi
  [[ "$major" =~ ^[0-9]+$ ]] || strait_die "cannot parse java version '$version' of $java"
  ((major >= 17)) || strait_die "$java is Java $version; Kafka $KAFKA_VERSION needs Java 17 or newer (set JAVA_HOME)"
}

strait_require_cmd() {
  local cmd="$1" hint="$2"
  command -v "$cmd" >/dev/null 2>&1 || strait_die "$cmd not found: $hint"
}

# True when the libs dir holds exactly what the current pom resolves to.
strait_kafka_fetched() {
  [[ -f "$KAFKA_FETCH_STAMP" && -d "$KAFKA_LIBS_DIR" ]] || return 1
  [[ "$(cat "$KAFKA_FETCH_STAMP")" == "$(strait_sha256 "$STRAIT_POM")" ]]
}

# Fetches Kafka unless already there. Its progress goes to stderr.
strait_ensure_kafka() {
  strait_kafka_fetched && return 0
  "$STRAIT_SCRIPTS_DIR/fetch-kafka" >&2
}

# The classpath Kafka's scripts would build: every jar in libs.
strait_kafka_classpath() { printf '%s\n' "$KAFKA_LIBS_DIR/*"; }

# Prints a script's header comment (from line 2 to the first non-comment line) as its usage.
strait_usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$1"; }

# perf/plot.py RESULTS_DIR OUT_DIR [--each] with matplotlib from a venv under the cache directory
# (STRAIT_BENCH_VENV, default $STRAIT_CACHE_DIR/bench-venv), installed on first use.
strait_plot() {
  local venv="${STRAIT_BENCH_VENV:-$STRAIT_CACHE_DIR/bench-venv}"
  if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
    strait_log "installing matplotlib into $venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet 'matplotlib>=3.7' >&2
  fi
  "$venv/bin/python" "$STRAIT_REPO_ROOT/perf/plot.py" "$@" >&2
}
