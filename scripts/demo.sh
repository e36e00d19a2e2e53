#!/usr/bin/env bash
# The main job on a local default: build strait, start the two-cluster test bed, generate traffic
# on the source with Kafka's own producer, replicate it with strait, and show the result; then the
# runbook's evidence: `strait smoke` (one stamped record through a running strait) and
# `strait verify` (every copied record compared with its source).
#
# Environment:
#   DEMO_RECORDS     records to produce with kafka-producer-perf-test [200000]
#   DEMO_PARTITIONS  partitions of the demo topic [4]
#   DEMO_CODEC       producer compression: none, gzip, snappy, lz4, zstd [lz4]
#   DEMO_STRAIT_BIN  an existing strait binary to run instead of building a release one
# The test bed is left running; stop it with scripts/testbed down.
set -euo pipefail
STRAIT_PROG=demo
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

case "${1:-}" in
  "") ;;
  -h | --help)
    strait_usage "${BASH_SOURCE[0]}"
    exit 0
    ;;
  *) strait_die "demo.sh takes no arguments (see --help)" ;;
esac

records="${DEMO_RECORDS:-200000}"
partitions="${DEMO_PARTITIONS:-4}"
codec="${DEMO_CODEC:-lz4}"
cd "$STRAIT_REPO_ROOT"

say() { printf '\n==> %s\n' "$*"; }

if [[ -n "${DEMO_STRAIT_BIN:-}" ]]; then
  strait_bin="$DEMO_STRAIT_BIN"
  [[ -x "$strait_bin" ]] || strait_die "DEMO_STRAIT_BIN=$strait_bin is not an executable"
else
  say "building strait (release)"
  cargo build --release -p strait-control --bin strait
  strait_bin="$STRAIT_REPO_ROOT/target/release/strait"
fi

say "starting the test bed"
"$STRAIT_SCRIPTS_DIR/fetch-kafka"
"$STRAIT_SCRIPTS_DIR/testbed" up
# shellcheck disable=SC1091
source "$STRAIT_TESTBED_DIR/testbed.env"
src="$STRAIT_SOURCE_BOOTSTRAP"
dst="$STRAIT_TARGET_BOOTSTRAP"

run_id="$(date +%s)"
topic="demo-$run_id"
work="$STRAIT_TESTBED_DIR/demo/$run_id"
mkdir -p "$work"

say "creating $topic ($partitions partitions) on the source and producing traffic"
"$STRAIT_SCRIPTS_DIR/kafka-tool" kafka-topics --bootstrap-server "$src" --create \
  --topic "$topic" --partitions "$partitions" --replication-factor 1 >/dev/null
"$STRAIT_SCRIPTS_DIR/kafka-tool" kafka-producer-perf-test --topic "$topic" \
  --num-records "$records" --record-size 512 --throughput -1 \
  --producer-props "bootstrap.servers=$src" "compression.type=$codec" linger.ms=10 batch.size=65536 |
  tail -n 1
# A few records with keys and headers in a one-partition topic of their own, so that the sample
# below shows exactly them (the perf records above have neither).
keyed="$topic-keyed"
"$STRAIT_SCRIPTS_DIR/kafka-tool" kafka-topics --bootstrap-server "$src" --create \
  --topic "$keyed" --partitions 1 --replication-factor 1 >/dev/null
printf 'app:demo,run:%s\tkey-%s\tvalue-%s\n' "$run_id" 1 1 "$run_id" 2 2 "$run_id" 3 3 |
  "$STRAIT_SCRIPTS_DIR/kafka-tool" kafka-console-producer --bootstrap-server "$src" --topic "$keyed" \
    --property parse.key=true --property parse.headers=true >/dev/null

# The smoke test's own topic (a runbook never writes test records into an application's topic).
smoke="$topic-smoke"
"$STRAIT_SCRIPTS_DIR/kafka-tool" kafka-topics --bootstrap-server "$src" --create \
  --topic "$smoke" --partitions 1 --replication-factor 1 >/dev/null

cat >"$work/mm2.properties" <<PROPS
# Written by scripts/demo.sh: one flow, source -> target, every demo topic.
clusters = source, target
source.bootstrap.servers = $src
target.bootstrap.servers = $dst
source->target.enabled = true
source->target.topics = demo-.*
target->source.emit.heartbeats.enabled = false
# One broker per cluster: every replication factor is 1.
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
strait.progress.topic.replication.factor = 1
PROPS

say "strait check"
"$strait_bin" check --config "$work/mm2.properties" | sed -n '1,12p'

say "replicating with strait run --until-caught-up"
start=$(date +%s.%N)
"$strait_bin" run --config "$work/mm2.properties" --until-caught-up 2>"$work/strait.log" || {
  tail -n 30 "$work/strait.log"
  strait_die "strait run failed (log: $work/strait.log)"
}
end=$(date +%s.%N)
tail -n 1 "$work/strait.log"

say "result"
remote="source.$topic"
echo "source $topic (end offsets):"
"$STRAIT_SCRIPTS_DIR/kafka-tool" kafka-get-offsets --bootstrap-server "$src" --topic "$topic"
echo "target $remote (end offsets):"
"$STRAIT_SCRIPTS_DIR/kafka-tool" kafka-get-offsets --bootstrap-server "$dst" --topic "$remote"
sum() { awk -F: '{s += $3} END {print s}'; }
n_src=$("$STRAIT_SCRIPTS_DIR/kafka-tool" kafka-get-offsets --bootstrap-server "$src" --topic "$topic" | sum)
n_dst=$("$STRAIT_SCRIPTS_DIR/kafka-tool" kafka-get-offsets --bootstrap-server "$dst" --topic "$remote" | sum)
echo "the keyed records on the target (source.$keyed), headers, key and value:"
"$STRAIT_SCRIPTS_DIR/kafka-tool" kafka-console-consumer --bootstrap-server "$dst" --topic "source.$keyed" \
  --from-beginning --max-messages 3 --timeout-ms 10000 \
  --property print.key=true --property print.headers=true 2>/dev/null | cut -c1-100 || true
echo "a record of $topic on the target (perf-test data: no key, no headers):"
"$STRAIT_SCRIPTS_DIR/kafka-tool" kafka-console-consumer --bootstrap-server "$dst" --topic "$remote" \
  --partition 0 --offset earliest --max-messages 1 --timeout-ms 10000 \
  --property print.key=true --property print.headers=true 2>/dev/null | cut -c1-100 || true
awk -v a="$start" -v b="$end" -v n="$n_dst" 'BEGIN {printf "strait copied %d records in %.1f s (including start-up and topic creation)\n", n, b - a}'
if [[ "$n_src" == "$n_dst" ]]; then
  echo "OK: the target holds all $n_dst records of the source."
else
  strait_die "the target holds $n_dst records, the source $n_src"
fi

say "runbook: strait smoke while strait runs, then strait verify"
"$strait_bin" run --config "$work/mm2.properties" 2>"$work/strait-runbook.log" &
strait_pid=$!
if ! "$strait_bin" smoke --config "$work/mm2.properties" --topic "$smoke"; then
  kill -TERM "$strait_pid" 2>/dev/null || true
  wait "$strait_pid" || true
  strait_die "strait smoke failed (strait's log: $work/strait-runbook.log)"
fi
kill -TERM "$strait_pid"
wait "$strait_pid" || strait_die "strait run did not stop cleanly (log: $work/strait-runbook.log)"
"$strait_bin" verify --config "$work/mm2.properties" --topics "$topic.*" ||
  strait_die "strait verify found differences"
echo "Run it again: it resumes from its stored progress and copies nothing twice."
echo "Config and log: $work. Stop the clusters with: scripts/testbed down"
