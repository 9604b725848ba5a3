#!/usr/bin/env bash
# The packaged unit under a real systemd: builds the .deb (scripts/package), installs it with
# apt into a copy of a cached minimal Debian root, boots systemd there in private PID and
# mount namespaces (the real-systemd.md recipe, with pivot_root for PrivateUsers=), and lets
# drive.py check start, traffic, reload, hardening, restarts, watchdog, stop and conffiles
# from the host. Everything it starts dies with the namespace's init, which it kills by PID;
# it checks that no process and no mount is left behind.
#
# Usage: tests/systemd/run_real_systemd_test.sh      (root; exit 77 = skipped: no namespaces)
#   GATEWAYD_DEB=path           use this .deb instead of building one
#   GATEWAYD_PACKAGE_TREE=dir   package this Release build tree (scripts/package dir); unset:
#                               scripts/package builds its own in build/package
#   GATEWAYD_TEST_CACHE         where the debootstrap root and apt's downloads are cached
#                               (default /var/cache/gatewayd-test)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
cache_dir=${GATEWAYD_TEST_CACHE:-/var/cache/gatewayd-test}
started=$SECONDS
log() { echo "[real-systemd $(date -u +%T) +$((SECONDS - started))s] $*" >&2; }
skip() { log "SKIP: $*"; exit 77; }

[[ $(id -u) -eq 0 ]] || skip "needs root (namespaces, mounts)"
for tool in unshare nsenter pivot_root setpriv mount python3 flock; do
  command -v "$tool" >/dev/null || skip "$tool is not installed"
done
unshare --pid --fork --mount --uts --ipc --propagation private true 2>/dev/null ||
  skip "private PID and mount namespaces are not available here"
command -v debootstrap >/dev/null || { log "debootstrap missing: run scripts/setup"; exit 1; }

mount_table() { awk '{print $5, $(NF-2), $(NF-1)}' /proc/self/mountinfo | sort; }
mounts_before=$(mount_table)

# --- the package, the cached root, a scratch area for this run --------------------------
if [[ -n ${GATEWAYD_DEB:-} ]]; then
  deb=$GATEWAYD_DEB
else
  log "building the package (scripts/package ${GATEWAYD_PACKAGE_TREE:-})"
  deb=$(timeout 1200 "$src/scripts/package" ${GATEWAYD_PACKAGE_TREE:+"$GATEWAYD_PACKAGE_TREE"} | tail -n 1)
fi
[[ -f $deb ]] || { log "no package at '$deb'"; exit 1; }
log "package: $deb"

log "root file system (cached debootstrap)"
lower=$(timeout 1500 "$here/rootfs_cache.sh")
log "cached root: $lower"

archives="$cache_dir/apt-archives"
mkdir -p "$archives/partial"
work=$(mktemp -d /var/tmp/gatewayd-systemd-test.XXXXXX)
root="$work/root"
mkdir -p "$work/upper" "$work/ovlwork" "$root"

# How many processes live in the PID namespace $1 (one pass over /proc, no fork per process).
ns_members() {
  python3 - "$1" <<'PY'
import os, sys
n = 0
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        n += os.readlink(f"/proc/{p}/ns/pid") == sys.argv[1]
    except OSError:
        pass
print(n)
PY
}

unshare_pid=
systemd_pid=
pidns=
cleanup() {
  local rc=$? leftover=0
  set +e
  if [[ -n $systemd_pid ]] && kill -0 "$systemd_pid" 2>/dev/null; then
    log "killing the booted systemd (PID $systemd_pid)"
    kill -KILL "$systemd_pid"
  fi
  if [[ -n $unshare_pid ]]; then
    for _ in $(seq 100); do kill -0 "$unshare_pid" 2>/dev/null || break; sleep 0.1; done
    wait "$unshare_pid" 2>/dev/null
    log "the namespace's unshare exited"
  fi
  # Nothing of the namespace may survive its init.
  if [[ -n $pidns ]]; then
    for _ in $(seq 100); do
      leftover=$(ns_members "$pidns")
      ((leftover == 0)) && break
      sleep 0.2
    done
    if ((leftover > 0)); then
      log "FAIL: $leftover processes of the test's PID namespace are still running"
      rc=1
    else
      log "no process of the namespace is left"
    fi
  fi
  local new_mounts
  new_mounts=$(comm -13 <(echo "$mounts_before") <(mount_table))
  if grep -qF -e "$work" -e "$lower" <<<"$new_mounts"; then
    log "FAIL: mounts leaked into the host:"$'\n'"$new_mounts"
    rc=1
  elif [[ -n $new_mounts ]]; then
    log "note: mounts appeared on the host meanwhile, none of this test's:"$'\n'"$new_mounts"
  else
    log "the host's mount table is as before"
  fi
  if [[ -z ${GATEWAYD_KEEP_WORK:-} ]]; then rm -rf "$work"; else log "kept $work"; fi
  log "done in $((SECONDS - started)) s, exit $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- boot ------------------------------------------------------------------------------
# The run's root is an overlay: the cached root read-only below, this run's changes above,
# so runs never touch the cache. apt's downloads are kept across runs.
cat >"$work/boot.sh" <<'BOOT'
set -e
root=$1 lower=$2 work=$3 archives=$4 deb=$5
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$work/upper,workdir=$work/ovlwork" "$root"
mount --bind "$root" "$root"     # the root must be a mount point, or every mount-namespace
                                 # directive of a unit fails with 226/NAMESPACE
mount --bind /dev "$root/dev"
mount -t sysfs sys "$root/sys"
mount -t proc proc "$root/proc"
mount -t tmpfs tmpfs "$root/run"
mount --bind "$archives" "$root/var/cache/apt/archives"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$deb" "$root/var/tmp/"
# pivot_root, not chroot: the kernel refuses new user namespaces to a chrooted process (its
# root is not its mount namespace's root), and the unit's PrivateUsers=yes needs one.
cd "$root"
pivot_root . .
umount -l .
mount --make-rshared /
exec /lib/systemd/systemd --system
BOOT
log "booting systemd in private PID+mount namespaces"
# If this script is killed outright (no trap runs), the kernel still ends the namespace:
# unshare gets SIGKILL when its parent dies, and --kill-child passes that on to systemd.
setpriv --pdeathsig KILL unshare --pid --kill-child --mount --uts --ipc --propagation private \
  sh "$work/boot.sh" "$root" "$lower" "$work" "$archives" "$deb" >"$work/boot.log" 2>&1 &
unshare_pid=$!
for _ in $(seq 100); do
  systemd_pid=$(cat /proc/"$unshare_pid"/task/*/children 2>/dev/null | awk '{print $1; exit}')
  [[ -n $systemd_pid ]] && break
  sleep 0.1
done
[[ -n $systemd_pid ]] || { log "FAIL: unshare started no child"; cat "$work/boot.log" >&2; exit 1; }
pidns=$(readlink "/proc/$systemd_pid/ns/pid")
log "systemd PID $systemd_pid (namespace $pidns)"

# A command in the booted system, bounded: in_root_timeout=N in_root CMD... (default 120 s).
in_root() {
  timeout "${in_root_timeout:-120}" nsenter -t "$systemd_pid" -m -p -u -i -- \
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb SYSTEMD_COLORS=0 "$@"
}
# Up when it answers (is-system-running --wait may hang on a getty that never starts).
deadline=$((SECONDS + 90))
until in_root_timeout=10 in_root systemctl show -p Version >/dev/null 2>&1; do
  if ((SECONDS > deadline)) || ! kill -0 "$systemd_pid" 2>/dev/null; then
    log "FAIL: systemd did not come up; boot log:"
    tail -n 40 "$work/boot.log" >&2
    exit 1
  fi
  sleep 0.5
done
log "systemd answers: $(in_root systemctl show -p Version --value)"

# --- install the package as an operator would ------------------------------------------
log "apt-get install /var/tmp/$(basename "$deb")"
install_deb() {
  in_root_timeout=600 in_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "/var/tmp/$(basename "$deb")" >"$work/apt.log" 2>&1
}
if ! install_deb; then
  log "apt-get install failed; refreshing the package lists and retrying"
  in_root_timeout=300 in_root apt-get update -q >>"$work/apt.log" 2>&1 || true
  install_deb || { log "FAIL: apt-get install"; tail -n 30 "$work/apt.log" >&2; exit 1; }
fi
log "installed: $(in_root dpkg-query -W -f='${Package} ${Version} ${Status}' gatewayd)"

# --- the checks --------------------------------------------------------------------------
export GATEWAYD_TEST_ROOT="/proc/$systemd_pid/root" GATEWAYD_TEST_SYSTEMD_PID=$systemd_pid
timeout 900 python3 "$here/drive.py"
log "PASS"
