#!/usr/bin/env bash
# sidebyside.sh: mooncake beside raw loopback TCP and Redis, same sizes and concurrency, one
# table out. Run it from anywhere inside the repository:
#
#   benchmarks/sidebyside.sh                       # 4KiB 64KiB 1MiB 16MiB at concurrency 8
#   SIZES="64KiB 1MiB" CONC="8 64" PREFAULT=1 benchmarks/sidebyside.sh
#
# What it does, in order:
#  1. builds ./cmd/mooncake into a temporary directory (or uses $MOONCAKE);
#  2. installs redis-server and redis-tools with apt-get when redis-server is missing and it
#     can (root, or sudo without a password); without them the Redis columns say "-";
#  3. starts a fresh `mooncake standalone` (DRAM only, --global_segment_size $SEGMENT,
#     --prefault_arena when PREFAULT=1), a Redis without persistence (no RDB, no AOF) and a
#     Redis with `appendonly yes, appendfsync always` (every SET fsynced to its AOF before
#     the reply: the durability of our default put, whose raft commit is fsynced), on the
#     ports below;
#  4. for every size and concurrency: `mooncake bench --op put --baseline` and
#     `mooncake bench --op get --baseline --shared_memory=$SHM` (raw loopback TCP is measured
#     by the same command right after mooncake: the "raw TCP" columns), then
#     `redis-benchmark -t set,get` with the same value size, concurrency and count, and
#     `redis-benchmark -t set` against the fsyncing Redis;
#  5. prints one table (ops/s, GB/s = 10^9 bytes/s, and mooncake's ratio to raw TCP and to
#     Redis), stops both servers and removes their data.
#
# Environment: SIZES, CONC, ROUNDS (default 3: each cell is the median of ROUNDS measurements,
# mooncake and raw TCP alternating as `mooncake bench --rounds` does), BYTES (bytes moved per measurement, default 1GiB; the count is
# BYTES/size, 200 to 20000), SEGMENT (default 4GiB), PREFAULT (0/1), SHM (false: gets over
# TCP, verified; true: through shared memory), REPLICAS (1), RPC_PORT (27551), REDIS_PORT
# (27552), REDIS_AOF_PORT (27553, the fsyncing Redis), MOONCAKE (a built binary), STANDALONE_FLAGS (more flags for the standalone, e.g.
# "--raft_fsync=false"). The figures are only comparable within one run: on a
# shared or loaded machine compare the ratios, not the absolute numbers.
set -euo pipefail

SIZES=${SIZES:-"4KiB 64KiB 1MiB 16MiB"}
CONC=${CONC:-8}
ROUNDS=${ROUNDS:-3}
BYTES=${BYTES:-1073741824}
SEGMENT=${SEGMENT:-4GiB}
PREFAULT=${PREFAULT:-0}
SHM=${SHM:-false}
REPLICAS=${REPLICAS:-1}
RPC_PORT=${RPC_PORT:-27551}
REDIS_PORT=${REDIS_PORT:-27552}
REDIS_AOF_PORT=${REDIS_AOF_PORT:-27553}
STANDALONE_FLAGS=${STANDALONE_FLAGS:-}

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/sidebyside.XXXXXX")
mc_pid="" redis_pid="" redis_aof_pid=""
cleanup() {
	# NB: no errexit here: a server's non-zero exit status from wait would end the trap
	# early and leave the others running (and their data behind).
	set +e
	for pid in $mc_pid $redis_pid $redis_aof_pid; do
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT
log() { echo "sidebyside: $*" >&2; }

# bytes SIZE: a size in human units (4KiB, 1MiB, 1GiB, 512) as bytes.
bytes() {
	local s=$1 n unit
	n=${s%%[A-Za-z]*}
	unit=${s#"$n"}
	case $unit in
	"" | B) echo "$n" ;;
	KiB) echo $((n << 10)) ;;
	MiB) echo $((n << 20)) ;;
	GiB) echo $((n << 30)) ;;
	*) log "unknown size unit in $s (use B, KiB, MiB or GiB)"; exit 2 ;;
	esac
}

# 1. mooncake
mc=${MOONCAKE:-}
if [ -z "$mc" ]; then
	log "building mooncake"
	(cd "$repo" && go build -o "$work/mooncake" ./cmd/mooncake)
	mc=$work/mooncake
fi

# 2. Redis
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
	sudo=""
	[ "$(id -u)" != 0 ] && command -v sudo >/dev/null && sudo -n true 2>/dev/null && sudo="sudo -n"
	if command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
		log "installing redis-server and redis-tools with apt-get"
		$sudo apt-get install -y -q redis-server redis-tools >&2 ||
			{ $sudo apt-get update -q >&2 && $sudo apt-get install -y -q redis-server redis-tools >&2; } ||
			log "could not install Redis; its columns will be empty"
	else
		log "redis-server is not installed and cannot be installed here; its columns will be empty"
	fi
fi
have_redis=0
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null && have_redis=1

# 3. servers
extra=()
[ "$PREFAULT" = 1 ] && extra+=(--prefault_arena)
# shellcheck disable=SC2206 # STANDALONE_FLAGS is a list of flags, split on spaces on purpose
extra+=($STANDALONE_FLAGS)
"$mc" standalone --rpc_port "$RPC_PORT" --metrics_port 0 --data_dir "$work/mooncake-data" \
	--global_segment_size "$SEGMENT" "${extra[@]}" >"$work/standalone.log" 2>&1 &
mc_pid=$!
master=127.0.0.1:$RPC_PORT
ready=0
for _ in $(seq 600); do # the worker registers asynchronously: wait until a put succeeds
	if echo x | "$mc" put --master_server_address "$master" sidebyside.ready - >/dev/null 2>&1; then
		ready=1
		break
	fi
	kill -0 "$mc_pid" 2>/dev/null || break
	sleep 0.1
done
if [ $ready != 1 ]; then
	log "mooncake standalone did not start:"
	tail -5 "$work/standalone.log" >&2
	exit 1
fi
"$mc" rm --master_server_address "$master" sidebyside.ready >/dev/null
if [ $have_redis = 1 ]; then
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$work" --proto-max-bulk-len 1gb --maxmemory 0 >"$work/redis.log" 2>&1 &
	redis_pid=$!
	mkdir -p "$work/redis-aof"
	redis-server --port "$REDIS_AOF_PORT" --bind 127.0.0.1 --save '' --appendonly yes --appendfsync always \
		--dir "$work/redis-aof" --proto-max-bulk-len 1gb --maxmemory 0 >"$work/redis-aof.log" 2>&1 &
	redis_aof_pid=$!
	for port in "$REDIS_PORT" "$REDIS_AOF_PORT"; do
		for _ in $(seq 100); do
			redis-cli -p "$port" ping >/dev/null 2>&1 && break
			sleep 0.1
		done
	done
	# A server left on a port by another run would answer those pings while ours exited:
	# measure only the Redis this run started.
	for pid in $redis_pid $redis_aof_pid; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "a redis-server this run started exited (port $REDIS_PORT or $REDIS_AOF_PORT in use?):"
			tail -n 3 "$work/redis.log" "$work/redis-aof.log" >&2
			exit 1
		fi
	done
fi

# field LINES NAME: the median over LINES (one per round) of the number before NAME (e.g.
# "ops/s", "GB/s") in bench output lines.
field() {
	awk -v want="$2" '{ for (i = 2; i <= NF; i++) if ($i == want) { print $(i-1); break } }' <<<"$1" | median
}
# median: the median of the numbers on stdin, one per line ("-" when none).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'; }
# ratio A B: A/B with 2 decimals, "-" when either is missing.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || a == "-" || b == "" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
# gbps OPS SIZE: GB/s of OPS operations per second of SIZE bytes.
gbps() { awk -v o="$1" -v s="$2" 'BEGIN { if (o == "" || o == "-") print "-"; else printf "%.3f", o * s / 1e9 }'; }

# 4. measurements
rows=()
for size in $SIZES; do
	b=$(bytes "$size")
	count=$((BYTES / b))
	((count < 200)) && count=200
	((count > 20000)) && count=20000
	for c in $CONC; do
		log "size $size, concurrency $c, $count operations"
		put=$("$mc" bench --master_server_address "$master" --op put --size "$size" --count "$count" \
			--concurrency "$c" --replicas "$REPLICAS" --baseline --rounds "$ROUNDS")
		get=$("$mc" bench --master_server_address "$master" --op get --size "$size" --count "$count" \
			--concurrency "$c" --replicas "$REPLICAS" --baseline --rounds "$ROUNDS" --shared_memory="$SHM")
		mc_put=$(grep '^mooncake put' <<<"$put")
		raw_put=$(grep '^loopback put' <<<"$put")
		mc_get=$(grep '^mooncake get' <<<"$get")
		raw_get=$(grep '^loopback get' <<<"$get")
		rset="-" rget="-" rfsync="-"
		if [ $have_redis = 1 ]; then
			csv="" aof=""
			for _ in $(seq "$ROUNDS"); do
				csv+=$(redis-benchmark -p "$REDIS_PORT" -t set,get -d "$b" -c "$c" -n "$count" --csv 2>/dev/null || true)$'\n'
				aof+=$(redis-benchmark -p "$REDIS_AOF_PORT" -t set -d "$b" -c "$c" -n "$count" --csv 2>/dev/null || true)$'\n'
			done
			rset=$(awk -F'"' '$2 == "SET" { print $4 }' <<<"$csv" | median)
			rget=$(awk -F'"' '$2 == "GET" { print $4 }' <<<"$csv" | median)
			rfsync=$(awk -F'"' '$2 == "SET" { print $4 }' <<<"$aof" | median)
			redis-cli -p "$REDIS_PORT" flushall >/dev/null
			redis-cli -p "$REDIS_AOF_PORT" flushall >/dev/null
			# The AOF keeps every SET: rewrite it so it does not fill the disk over a long run.
			redis-cli -p "$REDIS_AOF_PORT" bgrewriteaof >/dev/null
		fi
		rows+=("$size|$c|$(field "$raw_put" ops/s)|$(field "$raw_put" GB/s)|$rset|$(gbps "$rset" "$b")|$rfsync|$(field "$mc_put" ops/s)|$(field "$mc_put" GB/s)|$(field "$raw_get" GB/s)|$rget|$(gbps "$rget" "$b")|$(field "$mc_get" ops/s)|$(field "$mc_get" GB/s)")
	done
done

# 5. the table
echo
echo "$("$mc" --version 2>/dev/null | head -1 || echo mooncake), standalone (DRAM, prefault=$PREFAULT${STANDALONE_FLAGS:+, $STANDALONE_FLAGS}, gets shared_memory=$SHM, $REPLICAS replica(s)); $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "medians of $ROUNDS rounds; GB/s = 10^9 bytes/s; x raw = mooncake GB/s / raw loopback TCP GB/s, x Redis = mooncake ops/s / Redis ops/s, x Redis fsync = the same against Redis with appendonly yes + appendfsync always (same run)"
echo
echo "| size | conc | raw TCP put ops/s | raw TCP put GB/s | Redis SET ops/s | Redis SET GB/s | Redis SET fsync ops/s | mooncake PUT ops/s | mooncake PUT GB/s | PUT x raw | PUT x Redis | PUT x Redis fsync | raw TCP get GB/s | Redis GET ops/s | Redis GET GB/s | mooncake GET ops/s | mooncake GET GB/s | GET x raw | GET x Redis |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do
	IFS='|' read -r size c rpo rpg rso rsg rfo mpo mpg rgg rgo rggb mgo mgg <<<"$r"
	echo "| $size | $c | $rpo | $rpg | $rso | $rsg | $rfo | $mpo | $mpg | $(ratio "$mpg" "$rpg") | $(ratio "$mpo" "$rso") | $(ratio "$mpo" "$rfo") | $rgg | $rgo | $rggb | $mgo | $mgg | $(ratio "$mgg" "$rgg") | $(ratio "$mgo" "$rgo") |"
done
