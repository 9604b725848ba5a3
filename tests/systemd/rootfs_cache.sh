#!/usr/bin/env bash
# Prints the path of a cached minimal Debian root with systemd (debootstrap), building it
# on first use. The cache key is a hash of the debootstrap arguments, so a changed mirror or
# package list builds a new root; concurrent callers wait on one lock instead of racing.
# Usage: tests/systemd/rootfs_cache.sh   (root; env GATEWAYD_TEST_CACHE overrides the dir)
set -euo pipefail

cache_dir=${GATEWAYD_TEST_CACHE:-/var/cache/gatewayd-test}
suite=bookworm
mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
args=(--variant=minbase --include=systemd,systemd-sysv,dbus "$suite")
key=$(printf '%s\n' "${args[@]}" "$mirror" | sha256sum | cut -c1-16)
root="$cache_dir/rootfs-$key"

mkdir -p "$cache_dir"
exec 9>"$cache_dir/rootfs-$key.lock"
flock -w 900 9 || { echo "rootfs_cache: timed out waiting for $root.lock" >&2; exit 1; }

if [[ ! -f $root/.complete ]]; then
  tmp="$root.tmp.$$"
  rm -rf "$tmp" "$root"
  echo "rootfs_cache: debootstrap ${args[*]} $mirror -> $root" >&2
  timeout 1200 debootstrap "${args[@]}" "$tmp" "$mirror" >"$cache_dir/debootstrap-$key.log" 2>&1 || {
    echo "rootfs_cache: debootstrap failed; tail of $cache_dir/debootstrap-$key.log:" >&2
    tail -n 20 "$cache_dir/debootstrap-$key.log" >&2
    rm -rf "$tmp"
    exit 1
  }
  # Package lists, so a copy of the root can install a .deb's dependencies with apt.
  unshare --mount --propagation private sh -c '
    mount -t proc proc "$1/proc" && mount --bind /dev "$1/dev" &&
    chroot "$1" apt-get update -qq' sh "$tmp" >>"$cache_dir/debootstrap-$key.log" 2>&1
  touch "$tmp/.complete"
  mv "$tmp" "$root"
fi
echo "$root"
