#!/usr/bin/env bash
# The README's DR runbook on the test bed, every step a strait command (Kafka's own tools play
# the applications): smoke test and verify while strait copies east -> west, drill of a consumer
# group, an unplanned failover (strait stopped, then records written to east that never reach
# west), the applications moved to west, then failback once east is back: the records left
# behind reported and quarantined, the reverse flow west -> east set up and run, the planned
# failover back to east with the group translated back, and east -> west copying again.
#
# Environment:
#   DR_RECORDS     records to produce with kafka-producer-perf-test [20000]
#   DR_STRAIT_BIN  an existing strait binary to run instead of building a release one
# Each run uses its own cluster aliases (east<n>, west<n>), topic and group, so that it can run
# again on the same test bed. The test bed is left running; stop it with scripts/testbed down.
set -euo pipefail
STRAIT_PROG=dr-runbook
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

case "${1:-}" in
  "") ;;
  -h | --help)
    strait_usage "${BASH_SOURCE[0]}"
    exit 0
    ;;
  *) strait_die "dr-runbook.sh takes no arguments (see --help)" ;;
esac

records="${DR_RECORDS:-20000}"
cd "$STRAIT_REPO_ROOT"

say() { printf '\n==> %s\n' "$*"; }
# Prints the command, then runs it.
run() {
  printf '$ %s\n' "$*" | sed "s|$strait_bin|strait|"
  "$@"
}
tool() { "$STRAIT_SCRIPTS_DIR/kafka-tool" "$@"; }
sum_ends() { tool kafka-get-offsets --bootstrap-server "$1" --topic "$2" 2>/dev/null | awk -F: '{s += $3} END {print s + 0}'; }
wait_ends() { # bootstrap topic count what
  local i
  for ((i = 0; i < 180; i++)); do
    [[ "$(sum_ends "$1" "$2")" == "$3" ]] && return 0
    sleep 1
  done
  strait_die "timed out waiting for $4 ($1 $2: $(sum_ends "$1" "$2") of $3)"
}
strait_pid=""
start_strait() {
  "$strait_bin" run --config "$work/mm2.properties" 2>>"$work/strait.log" &
  strait_pid=$!
}
stop_strait() {
  [[ -n "$strait_pid" ]] || return 0
  kill -TERM "$strait_pid" 2>/dev/null || true
  wait "$strait_pid" || true
  strait_pid=""
}
trap stop_strait EXIT

if [[ -n "${DR_STRAIT_BIN:-}" ]]; then
  strait_bin="$DR_STRAIT_BIN"
  [[ -x "$strait_bin" ]] || strait_die "DR_STRAIT_BIN=$strait_bin is not an executable"
else
  say "building strait (release)"
  cargo build --release -p strait-control --bin strait
  strait_bin="$STRAIT_REPO_ROOT/target/release/strait"
fi

"$STRAIT_SCRIPTS_DIR/fetch-kafka"
"$STRAIT_SCRIPTS_DIR/testbed" up >/dev/null
# shellcheck disable=SC1091
source "$STRAIT_TESTBED_DIR/testbed.env"
east_bs="$STRAIT_SOURCE_BOOTSTRAP"
west_bs="$STRAIT_TARGET_BOOTSTRAP"

n="$(($(date +%s) % 100000))"
east="east$n"
west="west$n"
work="$STRAIT_TESTBED_DIR/dr-runbook/$n"
mkdir -p "$work"
# Topics and groups are per run: a test bed keeps those of earlier runs.
topic="orders-$n"
group="billing-$n"
remote="$east.$topic"

cat >"$work/mm2.properties" <<PROPS
# Written by scripts/dr-runbook.sh
clusters = $east, $west
$east.bootstrap.servers = $east_bs
$west.bootstrap.servers = $west_bs
$east->$west.enabled = true
$east->$west.topics = $topic
emit.heartbeats.enabled = false
# The test bed may hold other runs' heartbeats topics: copy only the runbook's topic.
heartbeats.replication.enabled = false
emit.checkpoints.interval.seconds = 1
refresh.groups.interval.seconds = 1
strait.api.listen = 127.0.0.1:0
# One broker per cluster: every replication factor is 1.
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
strait.progress.topic.replication.factor = 1
PROPS
cd "$work"

say "$topic on $east: $records records from kafka-producer-perf-test; $group reads 3000 of them"
tool kafka-topics --bootstrap-server "$east_bs" --create --topic "$topic" --partitions 2 \
  --replication-factor 1 >/dev/null
tool kafka-producer-perf-test --topic "$topic" --num-records "$records" --record-size 200 \
  --throughput -1 --producer-props bootstrap.servers="$east_bs" acks=all >/dev/null
tool kafka-console-consumer --bootstrap-server "$east_bs" --topic "$topic" --group "$group" \
  --from-beginning --max-messages 3000 >/dev/null 2>&1

say "1. smoke test, while strait copies $east -> $west"
start_strait
run "$strait_bin" smoke --config mm2.properties --topic "$topic"
wait_ends "$west_bs" "$remote" "$((records + 1))" "the copy"

say "2. verify the copy"
run "$strait_bin" verify --config mm2.properties

say "3. drill: would $group resume exactly on $west?"
run "$strait_bin" drill --config mm2.properties --group "$group"

say "4. $east is lost: strait stops, $east takes 20 more records that never reach $west"
stop_strait
seq 1 20 | sed 's/^/written-after-the-loss-/' |
  tool kafka-console-producer --bootstrap-server "$east_bs" --topic "$topic" \
    --producer-property partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner
run "$strait_bin" failover --config mm2.properties --source-unavailable --groups "$group"

say "5. the applications run on $west: 500 records to $topic there; $group reads 1000 more"
tool kafka-topics --bootstrap-server "$west_bs" --create --topic "$topic" --partitions 2 \
  --replication-factor 1 >/dev/null
tool kafka-producer-perf-test --topic "$topic" --num-records 500 --record-size 200 \
  --throughput -1 --producer-props bootstrap.servers="$west_bs" acks=all >/dev/null
tool kafka-console-consumer --bootstrap-server "$west_bs" --topic "$remote" --group "$group" \
  --max-messages 1000 >/dev/null 2>&1

say "6. $east is back: what it holds beyond the copy"
run "$strait_bin" failback --config mm2.properties --flow "$east->$west" || true
echo "# the reverse flow, added to mm2.properties:"
tee -a mm2.properties <<PROPS
$west->$east.enabled = true
$west->$east.topics = $topic
PROPS
run "$strait_bin" failback --config mm2.properties --flow "$east->$west" --quarantine

say "7. the reverse flow copies what was written on $west back to $east"
start_strait
wait_ends "$east_bs" "$west.$topic" 500 "the reverse copy"
tool kafka-get-offsets --bootstrap-server "$east_bs" --topic "$west.$topic"

say "8. the producers on $west stopped: fail over back to $east"
run "$strait_bin" failover --config mm2.properties --flow "$west->$east" --groups "$group" \
  --quiet-seconds 2
stop_strait
tool kafka-consumer-groups --bootstrap-server "$east_bs" --describe --group "$group" 2>/dev/null |
  awk 'NF {printf "%-14s %-14s %-9s %-14s %-14s %s\n", $1, $2, $3, $4, $5, $6}'

say "9. $west is $east's copy again: $east->$west copies $topic again"
run "$strait_bin" failback --config mm2.properties --flow "$east->$west" --resume
copied="$(sum_ends "$west_bs" "$remote")"
start_strait
wait_ends "$west_bs" "$remote" "$((copied + 20))" "the copy again (the 20 records left behind first)"
stop_strait
tool kafka-get-offsets --bootstrap-server "$west_bs" --topic "$remote"
echo "OK: DR runbook complete. Config and log: $work"
