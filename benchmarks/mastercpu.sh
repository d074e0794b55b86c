#!/usr/bin/env bash
# mastercpu.sh: the master's own CPU time per put (issue 23 item 2), counted from the master
# process's utime+stime in /proc/PID/stat around a run of single-threaded puts. Run it from
# anywhere inside the repository:
#
#   benchmarks/mastercpu.sh                          # 64KiB, 3000 puts, fsync on and off, 3 rounds
#   COUNT=5000 ROUNDS=5 PROFILE=/tmp/prof benchmarks/mastercpu.sh
#
# What it does, for each --raft_fsync value in FSYNC and each of ROUNDS rounds:
#  1. starts a fresh `mooncake master` (one voter, its own process, data in a temporary
#     directory) and a `mooncake worker` (another process, --global_segment_size $SEGMENT);
#  2. waits until a put succeeds (the worker registers asynchronously), then WARMUP puts;
#  3. reads the master's utime+stime, runs `mooncake bench --op put --size $SIZE --count $COUNT
#     --concurrency 1 --shared_memory=false` (every put: PutStart and PutEnd at the master, the
#     bytes over TCP to the worker), reads them again; with PROFILE set it also takes a CPU
#     profile of the master from its metrics port during the run (PROFILE/fsync-F-round-R.pprof;
#     read it with `go tool pprof -top`);
#  4. stops both and prints one line: master CPU per put in ms, puts/s, p50.
# Then the median of the rounds for each fsync value, and, when FSYNC has both values, what
# the fsynced commit adds to a put's p50 beside what this disk takes to sync a 4 KiB append
# and a 4 KiB overwrite (dd with oflag=dsync in the same directory; a bolt commit writes and
# syncs its log pages, then writes and syncs its meta page).
#
# Environment: SIZE (64KiB), COUNT (3000), WARMUP (200), ROUNDS (3), FSYNC ("true false"),
# SEGMENT (1GiB), PROFILE (a directory, default none), MOONCAKE (a built binary; default: build
# ./cmd/mooncake), MASTER_FLAGS (more flags for the master). The master's idle CPU (raft ticks,
# the worker's heartbeats) is inside the count; IDLE_S (default 0) seconds of idle are
# measured first and reported per second so it can be told apart.
set -euo pipefail

SIZE=${SIZE:-64KiB}
COUNT=${COUNT:-3000}
WARMUP=${WARMUP:-200}
ROUNDS=${ROUNDS:-3}
FSYNC=${FSYNC:-"true false"}
SEGMENT=${SEGMENT:-1GiB}
PROFILE=${PROFILE:-}
IDLE_S=${IDLE_S:-0}
MASTER_FLAGS=${MASTER_FLAGS:-}

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/mastercpu.XXXXXX")
master_pid="" worker_pid=""
stop() {
	[ -n "$worker_pid" ] && kill "$worker_pid" 2>/dev/null && wait "$worker_pid" 2>/dev/null
	[ -n "$master_pid" ] && kill "$master_pid" 2>/dev/null && wait "$master_pid" 2>/dev/null
	worker_pid="" master_pid=""
	return 0
}
trap 'stop; rm -rf "$work"' EXIT
log() { echo "mastercpu: $*" >&2; }

mc=${MOONCAKE:-}
if [ -z "$mc" ]; then
	log "building mooncake"
	(cd "$repo" && go build -o "$work/mooncake" ./cmd/mooncake)
	mc=$work/mooncake
fi
[ -n "$PROFILE" ] && mkdir -p "$PROFILE"
hz=$(getconf CLK_TCK)

# freeport: a free TCP port on 127.0.0.1 (bound and released; the servers bind it next).
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# cputicks PID: utime+stime of PID in clock ticks (fields 14 and 15 of /proc/PID/stat; the
# command name in field 2 has no spaces here).
cputicks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# median: the median of the numbers on stdin, one per line.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'; }

# p50us: the p50 of a bench result line on stdin ("p50 834µs", "p50 1.03ms"), in µs.
p50us() {
	sed -n 's/.*p50 \([0-9.]*\)\(µs\|ms\|s\) .*/\1 \2/p' | awk '{ m = ($2 == "ms") ? 1000 : ($2 == "s") ? 1e6 : 1; print $1 * m }'
}
# dsyncus FILE CONV: µs per 4 KiB write with O_DSYNC (write + fdatasync), 200 writes, dd's
# conv=CONV (notrunc over FILE's existing blocks: overwrites; else appends to a new file).
dsyncus() {
	dd if=/dev/zero of="$1" bs=4k count=200 oflag=dsync ${2:+conv=$2} 2>&1 |
		sed -n 's/.* copied, \([0-9.e-]*\) s,.*/\1/p' | awk '{ printf "%.0f", $1 * 1e6 / 200 }'
}

declare -A results p50s
for fsync in $FSYNC; do
	for round in $(seq "$ROUNDS"); do
		d=$work/run-$fsync-$round
		mkdir -p "$d"
		rpc=$(freeport) raft=$(freeport) mport=$(freeport)
		master=127.0.0.1:$rpc
		# shellcheck disable=SC2086 # MASTER_FLAGS is a list of flags, split on spaces on purpose
		"$mc" master --id m1 --data_dir "$d/master" --rpc_address "$master" --raft_address "127.0.0.1:$raft" \
			--metrics_port "$mport" --raft_fsync="$fsync" --enable_metric_reporting=false $MASTER_FLAGS \
			>"$d/master.log" 2>&1 &
		master_pid=$!
		"$mc" worker --master_server_address "$master" --global_segment_size "$SEGMENT" --metrics_port 0 \
			--populate_arena=false >"$d/worker.log" 2>&1 &
		worker_pid=$!
		ready=0
		for _ in $(seq 300); do
			if echo x | "$mc" put --master_server_address "$master" mastercpu.ready - >/dev/null 2>&1; then
				ready=1
				break
			fi
			sleep 0.1
		done
		if [ $ready != 1 ]; then
			log "the master or worker did not start:"
			tail -5 "$d/master.log" "$d/worker.log" >&2
			exit 1
		fi
		"$mc" bench --master_server_address "$master" --op put --size "$SIZE" --count "$WARMUP" \
			--concurrency 1 --shared_memory=false >/dev/null
		idle=""
		if [ "$IDLE_S" != 0 ]; then
			i0=$(cputicks "$master_pid")
			sleep "$IDLE_S"
			i1=$(cputicks "$master_pid")
			idle=$(awk -v t=$((i1 - i0)) -v hz="$hz" -v s="$IDLE_S" 'BEGIN { printf ", idle %.2f ms/s", t * 1000 / hz / s }')
		fi
		prof_pid=""
		if [ -n "$PROFILE" ]; then
			curl -s "http://127.0.0.1:$mport/debug/pprof/profile?seconds=${PROFILE_S:-5}" \
				-o "$PROFILE/fsync-$fsync-round-$round.pprof" &
			prof_pid=$!
		fi
		c0=$(cputicks "$master_pid")
		out=$("$mc" bench --master_server_address "$master" --op put --size "$SIZE" --count "$COUNT" \
			--concurrency 1 --shared_memory=false)
		c1=$(cputicks "$master_pid")
		[ -n "$prof_pid" ] && wait "$prof_pid"
		stop
		line=$(grep '^mooncake put' <<<"$out" || echo "$out" | tail -1)
		per=$(awk -v t=$((c1 - c0)) -v hz="$hz" -v n="$COUNT" 'BEGIN { printf "%.3f", t * 1000 / hz / n }')
		results[$fsync]+="$per"$'\n'
		p50s[$fsync]+="$(p50us <<<"$line")"$'\n'
		echo "raft_fsync=$fsync round $round: master CPU $per ms/put$idle; $line"
	done
done
echo
echo "$SIZE puts, concurrency 1, $COUNT per round, medians of $ROUNDS rounds; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for fsync in $FSYNC; do
	echo "raft_fsync=$fsync: master CPU $(printf '%s' "${results[$fsync]}" | median) ms/put, put p50 $(printf '%s' "${p50s[$fsync]}" | median) µs"
done
if [ -n "${p50s[true]:-}" ] && [ -n "${p50s[false]:-}" ]; then
	on=$(printf '%s' "${p50s[true]}" | median) off=$(printf '%s' "${p50s[false]}" | median)
	app=$(dsyncus "$work/dsync.probe") over=$(dsyncus "$work/dsync.probe" notrunc)
	echo "the fsynced commit adds $(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.0f", a - b }') µs to a put's p50;" \
		"this disk syncs a 4 KiB append in $app µs and a 4 KiB overwrite in $over µs (dd oflag=dsync, in $work)"
fi
