#!/usr/bin/env bash
# Throughput of gatewayd with [metrics] enabled = true (scraped every second) against
# enabled = false: 1 supplier -> 1 consumer (backpressure, so nothing is dropped), 128-byte
# payloads, ROUNDS rounds of one run each (SECONDS long, the order alternating). Prints each
# run, and the medians and their ratio for the rate and for the gateway's CPU per frame.
#   bench/metrics_overhead.sh [BUILD_DIR=build/release] [ROUNDS=3] [SECONDS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
rounds=${2:-3}
seconds=${3:-5}
gatewayd=$build/gateway/gatewayd
bench=$build/bench/metrics_overhead
work=$(mktemp -d)
gw_pid=
cleanup() {
  [[ -n $gw_pid ]] && kill "$gw_pid" 2>/dev/null && wait "$gw_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The port of "KEY": "HOST:PORT" in gatewayd's ports file (empty when absent or null).
port_of() { sed -nE "s/.*\"$1\": \"[^\"]*:([0-9]+)\".*/\1/p" <<<"$2"; }

# gatewayd's ports file once the process $1 has written it (its pid first), or fails.
wait_for_ports() {
  local pid=$1 file=$2 log=$3 text
  for _ in $(seq 200); do
    text=$(cat "$file" 2>/dev/null || true)
    [[ $text == "{\"pid\": $pid,"* ]] && { echo "$text"; return 0; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "metrics_overhead: gatewayd did not start:" >&2
  cat "$log" >&2
  return 1
}

run_once() {  # $1 = on|off; prints the received frames/s
  local mode=$1 cport enabled log ports sport mport args
  cport=$(free_port)
  enabled=$([[ $mode == on ]] && echo true || echo false)
  cat >"$work/routes.toml" <<TOML
[consumers.bench]
endpoint = "127.0.0.1:$cport"
overflow = "backpressure"
[[routes]]
match = "bench.>"
to = ["bench"]
TOML
  cat >"$work/gatewayd.toml" <<TOML
[gateway]
supplier_listen = "127.0.0.1:0"
threads = 2
routes_file = "routes.toml"
[metrics]
listen = "127.0.0.1:0"
enabled = $enabled
TOML
  log=$work/gatewayd-$mode.log
  "$gatewayd" --config "$work/gatewayd.toml" --ports-file "$work/ports-$mode.json" 2>"$log" &
  gw_pid=$!
  if ! ports=$(wait_for_ports "$gw_pid" "$work/ports-$mode.json" "$log"); then
    kill "$gw_pid" 2>/dev/null
    wait "$gw_pid" || true
    return 1
  fi
  sport=$(port_of supplier "$ports")
  args=(--supplier-port "$sport" --consumer-port "$cport" --payload 128 --seconds "$seconds"
    --gateway-pid "$gw_pid")
  if [[ $mode == on ]]; then
    mport=$(port_of metrics "$ports")
    args+=(--scrape "$mport")
  fi
  local out
  out=$("$bench" "${args[@]}")
  echo "metrics $mode: $out" >&2
  kill "$gw_pid"
  wait "$gw_pid" || true
  gw_pid=
  sed -E 's/.*received_frames_per_s=([0-9]+) gateway_cpu_ns_per_frame=([0-9.]+).*/\1 \2/' <<<"$out"
}

on=() off=() on_cpu=() off_cpu=()
for ((i = 0; i < rounds; i++)); do
  # Alternate which goes first: a run right after another must not always be the same mode.
  order=(on off)
  ((i % 2)) && order=(off on)
  for mode in "${order[@]}"; do
    read -r rate cpu <<<"$(run_once "$mode")"
    [[ -n $rate ]] || { echo "metrics_overhead: the $mode run failed" >&2; exit 1; }
    if [[ $mode == on ]]; then
      on+=("$rate") on_cpu+=("$cpu")
    else
      off+=("$rate") off_cpu+=("$cpu")
    fi
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a/b}'; }
m_on=$(median "${on[@]}") m_off=$(median "${off[@]}")
c_on=$(median "${on_cpu[@]}") c_off=$(median "${off_cpu[@]}")
echo "median frames/s: metrics on $m_on, off $m_off, ratio on/off $(ratio "$m_on" "$m_off")"
echo "median gateway CPU ns/frame: metrics on $c_on, off $c_off, ratio on/off $(ratio "$c_on" "$c_off")"
