#!/usr/bin/env bash
# scripts/probe-user-timeout, run as an operator would: each shape ends its connection with
# ETIMEDOUT, no sooner than the TCP_USER_TIMEOUT asked for and within the kernel's retransmission
# schedule after it (docs/operations.md, "What survives what"). Needs what the fault suites need.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [[ $EUID -ne 0 ]] || ! command -v ip >/dev/null || ! command -v nft >/dev/null ||
  ! ip netns add gatewayd-probe-check 2>/dev/null; then
  echo "SKIPPED: network namespaces unavailable: not root, or no ip/nft"
  exit 0
fi
ip netns del gatewayd-probe-check
out=$("$root/scripts/probe-user-timeout" 1000 1)
echo "$out"
for shape in input output; do
  line=$(grep "^$shape: failed " <<<"$out") || { echo "FAIL: no line for $shape"; exit 1; }
  grep -q "(Connection timed out)" <<<"$line" || { echo "FAIL: $shape did not time out"; exit 1; }
  seconds=$(sed -E 's/.*failed ([0-9.]+) s.*/\1/' <<<"$line")
  # At least the timeout; at most the timeout plus the next retransmission timer's wait.
  awk -v s="$seconds" 'BEGIN { exit !(s >= 1.0 && s <= 3.5) }' ||
    { echo "FAIL: $shape took $seconds s, outside 1.0-3.5 s"; exit 1; }
done
echo "probe-user-timeout: both shapes ended within their bounds"
