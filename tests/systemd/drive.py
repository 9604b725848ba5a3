#!/usr/bin/env python3
"""Checks gatewayd.service in a booted systemd from the host (run by run_real_systemd_test.sh).

The booted root is reached through /proc/<systemd>/root (files) and nsenter (commands); the network namespace is the host's, so suppliers and consumers are plain
loopback sockets here. Every wait is bounded; the first failed check raises.
"""
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time

ROOT = os.environ["GATEWAYD_TEST_ROOT"]  # /proc/<pid>/root: the booted root seen from the host
SYSTEMD_PID = os.environ["GATEWAYD_TEST_SYSTEMD_PID"]
UNIT = "gatewayd.service"
T0 = time.monotonic()


def log(msg):
    print(f"[drive +{time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)
    log(f"ok: {what}")


def in_root(*args, timeout=60, ok=True):
    cmd = ["nsenter", "-t", SYSTEMD_PID, "-m", "-p", "-u", "-i", "--", "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "TERM=dumb",
           "SYSTEMD_COLORS=0", "SYSTEMD_PAGER=", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if ok and r.returncode != 0:
        raise Failure(f"{' '.join(args)} exited {r.returncode}: {r.stdout}{r.stderr}")
    return r


def show(*props):
    out = in_root("systemctl", "show", UNIT, *(f"-p{p}" for p in props)).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def eventually(pred, timeout, what, interval=0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failure(f"timed out after {timeout} s: {what}")
        time.sleep(interval)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def frame(address, payload):
    a = address.encode()
    return b"GW\x01\x00" + struct.pack(">HI", len(a), len(payload)) + a + payload


class Consumer:
    """A GWP/1 consumer endpoint on 127.0.0.1: accepts the gateway's (re)connections and
    records every whole frame; a malformed byte stream is recorded as corruption."""

    def __init__(self, name):
        self.name = name
        self.frames = []
        self.connections = 0
        self.corrupt = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn):
        buf = b""
        conn.settimeout(0.5)
        with conn:
            while self.running:
                try:
                    data = conn.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if not data:
                    break
                buf += data
                while len(buf) >= 10:
                    if buf[:4] != b"GW\x01\x00":
                        with self.lock:
                            self.corrupt.append(buf[:16])
                        return
                    alen, plen = struct.unpack(">HI", buf[4:10])
                    if len(buf) < 10 + alen + plen:
                        break
                    address = buf[10:10 + alen].decode()
                    payload = buf[10 + alen:10 + alen + plen]
                    buf = buf[10 + alen + plen:]
                    with self.lock:
                        self.frames.append((address, payload))

    def got(self, address, payload):
        with self.lock:
            return (address, payload) in self.frames

    def close(self):
        self.running = False
        self.sock.close()


def send(port, frames, timeout=10):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"".join(frame(a, p) for a, p in frames))
        s.shutdown(socket.SHUT_WR)
        s.settimeout(2)
        try:
            s.recv(1)  # the gateway sends nothing back; wait briefly for an orderly close
        except OSError:
            pass


def delivered(port, address, consumer, timeout, tag):
    """Sends uniquely tagged frames until one reaches the consumer (a restarted gateway may
    still be dialling it); returns the seconds it took."""
    start = time.monotonic()
    n = 0

    def attempt():
        nonlocal n
        n += 1
        payload = f"{tag}-{n}".encode()
        try:
            send(port, [(address, payload)])
        except OSError:
            return False
        return _wait_frame(consumer, address, payload, 2)

    eventually(attempt, timeout, f"a frame to {address} reaches {consumer.name} ({tag})", 0.1)
    return time.monotonic() - start


def _wait_frame(consumer, address, payload, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if consumer.got(address, payload):
            return True
        time.sleep(0.05)
    return False


def port_answers(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False


def journal(since_cursor=None):
    args = ["journalctl", "-u", UNIT, "--no-pager", "-o", "short-monotonic"]
    if since_cursor:
        args += ["--after-cursor", since_cursor]
    return in_root(*args).stdout


def journal_cursor():
    out = in_root("journalctl", "-u", UNIT, "-n", "0", "--show-cursor", "--no-pager", ok=False)
    m = re.search(r"-- cursor: (\S+)", out.stdout)
    return m.group(1) if m else None


def write_root_file(path, text):
    """Replaces a file of the booted root at once (write aside, rename), as an editor does:
    the gateway also watches its configuration files and must never read half an edit."""
    tmp = f"{ROOT}{path}.drive-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.rename(tmp, ROOT + path)


def routes(billing, audit, extra=""):
    return f"""# written by tests/systemd/drive.py
[consumers.billing]
endpoint = "127.0.0.1:{billing.port}"

[consumers.audit]
endpoint = "127.0.0.1:{audit.port}"

[[routes]]
match = "orders.*.created"
to = ["billing"]
{extra}"""


def exposure(text):
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", text)
    if not m:
        raise Failure(f"no exposure level in:\n{text}")
    return float(m.group(1))


def main():
    billing, audit = Consumer("billing"), Consumer("audit")
    supplier_port, metrics_port = free_port(), free_port()
    while metrics_port == supplier_port:
        metrics_port = free_port()

    # Point the installed configuration at this test's loopback ports.
    conf = open(ROOT + "/etc/gatewayd/gatewayd.toml").read()
    conf = re.sub(r'(?m)^supplier_listen = .*$', f'supplier_listen = "127.0.0.1:{supplier_port}"', conf)
    conf = re.sub(r'(?m)^listen = .*$', f'listen = "127.0.0.1:{metrics_port}"', conf)
    write_root_file("/etc/gatewayd/gatewayd.toml", conf)
    write_root_file("/etc/gatewayd/routes.toml", routes(billing, audit))
    log(f"supplier port {supplier_port}, metrics {metrics_port}, consumers billing "
        f"{billing.port} audit {audit.port}")

    # --- start: active only after READY=1 -------------------------------------------------
    props = show("Type", "NotifyAccess", "WatchdogUSec", "RestartUSec", "UnitFileState")
    check(props["Type"] == "notify", f"the unit is Type=notify ({props})")
    check(props["UnitFileState"] == "disabled", "the package does not enable the unit by itself")
    t = time.monotonic()
    in_root("systemctl", "enable", "--now", UNIT, timeout=120)
    log(f"systemctl enable --now returned after {time.monotonic() - t:.1f} s")
    # The start job ends at READY=1, so the listener answers at once: no retry here.
    check(port_answers(supplier_port), "the supplier port answers as soon as the start job ends")
    st = show("ActiveState", "SubState", "MainPID", "StatusErrno", "NRestarts", "UnitFileState")
    check(st["ActiveState"] == "active" and st["SubState"] == "running", f"active (running): {st}")
    check(st["UnitFileState"] == "enabled", "enabled")
    j = journal()
    listening = [l for l in j.splitlines() if "listening for suppliers" in l]
    started = [l for l in j.splitlines() if re.search(r"systemd\[1\]: Started ", l)]
    check(listening and started, "the journal has the gateway's listening line and systemd's Started")
    mono = lambda line: float(re.match(r"\[\s*([0-9.]+)\]", line).group(1))
    check(mono(listening[-1]) <= mono(started[-1]),
          "systemd reported Started only after the gateway listened (READY=1)")

    status = in_root("systemctl", "status", UNIT, "--no-pager", "-l", "-n", "15", ok=False).stdout
    print("---- systemctl status gatewayd (after enable --now) ----\n" + status +
          "---- end of status ----", flush=True)

    # --- traffic from the host through the gateway to a host consumer --------------------
    took = delivered(supplier_port, "orders.eu.created", billing, 30, "first")
    check(True, f"a frame from the host reached billing on the host ({took:.2f} s)")
    batch = [("orders.us.created", f"batch-{i}".encode()) for i in range(200)]
    send(supplier_port, batch)
    eventually(lambda: all(billing.got(a, p) for a, p in batch), 20, "200 frames reach billing")
    check(True, "200 frames in one connection all reached billing, byte for byte")

    # --- reload: a valid edit takes effect -----------------------------------------------
    main_pid = show("MainPID")["MainPID"]
    write_root_file("/etc/gatewayd/routes.toml", routes(billing, audit, """
[[routes]]
match = "invoices.>"
to = ["audit"]
"""))
    cursor = journal_cursor()
    in_root("systemctl", "reload", UNIT, timeout=60)
    # The gateway may also have reloaded on its own (it watches the files); the SIGHUP from
    # ExecReload must have reloaded it too.
    line = eventually(lambda: re.search(r"routing table reloaded \(SIGHUP\)[^\n]*", journal(cursor)),
                      15, "the SIGHUP reload in the journal")
    check(True, f"systemctl reload: {line.group(0)}")
    took = delivered(supplier_port, "invoices.eu.paid", audit, 20, "after-reload")
    check(True, f"after a valid reload, invoices.> reaches audit ({took:.2f} s)")
    check(show("MainPID")["MainPID"] == main_pid, "reload kept the same process")

    # --- reload: a broken edit fails, is in the journal, and the old table stays ---------
    cursor = journal_cursor()
    write_root_file("/etc/gatewayd/routes.toml", routes(billing, audit, """
[[routes]]
match = "invoices.>"
to = ["nobody"]
"""))
    r = in_root("systemctl", "reload", UNIT, timeout=60, ok=False)
    check(r.returncode != 0, f"systemctl reload of a broken edit fails (exit {r.returncode})")
    err = eventually(lambda: re.search(r"/etc/gatewayd/routes\.toml:\d+:\d+: [^\n]*",
                                       journal(cursor)), 15, "the error in the journal")
    check(True, f"journalctl -u gatewayd shows the error: {err.group(0)}")
    delivered(supplier_port, "invoices.eu.paid", audit, 20, "after-broken-reload")
    delivered(supplier_port, "orders.eu.created", billing, 20, "after-broken-reload")
    st = show("ActiveState", "MainPID")
    check(st["ActiveState"] == "active" and st["MainPID"] == main_pid,
          "after the failed reload the same process routes with the old table")
    write_root_file("/etc/gatewayd/routes.toml", routes(billing, audit, """
[[routes]]
match = "invoices.>"
to = ["audit"]
"""))
    in_root("systemctl", "reload", UNIT, timeout=60)

    # --- identity and hardening ----------------------------------------------------------
    proc = in_root("cat", f"/proc/{main_pid}/status").stdout
    field = lambda name: re.search(rf"^{name}:\s*(.*)$", proc, re.M).group(1).split()
    uids = [int(u) for u in field("Uid")]
    check(all(u != 0 for u in uids), f"gatewayd runs as a non-root user (Uid: {uids})")
    dyn = show("DynamicUser")["DynamicUser"]
    check(dyn == "yes" and 61184 <= uids[0] <= 65519, f"a dynamic user (DynamicUser={dyn}, uid {uids[0]})")
    check(field("CapEff") == ["0000000000000000"], "no effective capabilities")
    check(field("NoNewPrivs") == ["1"], "NoNewPrivs")
    check(field("Seccomp") == ["2"], "a seccomp filter is applied")
    online = in_root("systemd-analyze", "security", UNIT, "--no-pager", ok=False).stdout
    offline = in_root("systemd-analyze", "security", "--offline=true", "--no-pager",
                      "/lib/systemd/system/gatewayd.service", ok=False).stdout
    live, static = exposure(online), exposure(offline)
    if live != static:
        ol, fl = set(online.splitlines()), set(offline.splitlines())
        log("booted only:\n" + "\n".join(sorted(ol - fl)) + "\noffline only:\n" +
            "\n".join(sorted(fl - ol)))
    check(live == static and live <= 1.2,
          f"systemd-analyze security: {live} booted == {static} offline, <= 1.2")
    mountinfo = in_root("cat", f"/proc/{main_pid}/mountinfo").stdout
    check(re.search(r" / / ro,", mountinfo) or re.search(r" /usr \S+ ro,", mountinfo),
          "ProtectSystem=strict: the service sees a read-only file system")

    # --- SIGKILL: Restart=on-failure, traffic resumes -------------------------------------
    restarts = int(show("NRestarts")["NRestarts"])
    in_root("systemctl", "kill", "--kill-who=main", "--signal=SIGKILL", UNIT)
    t = time.monotonic()
    st = eventually(lambda: (lambda s: s if s["MainPID"] not in ("0", main_pid)
                             and s["ActiveState"] == "active" else None)(
                    show("MainPID", "ActiveState", "NRestarts")), 60, "restart after SIGKILL")
    check(int(st["NRestarts"]) == restarts + 1,
          f"SIGKILL: systemd restarted it ({time.monotonic() - t:.1f} s, MainPID {main_pid} -> {st['MainPID']})")
    took = delivered(supplier_port, "orders.eu.created", billing, 30, "after-sigkill")
    check(True, f"traffic resumes after the restart ({took:.2f} s)")
    main_pid = st["MainPID"]

    # --- SIGSTOP: the watchdog kills and restarts it ----------------------------------------
    p = show("WatchdogUSec", "RestartUSec", "NRestarts")
    usec = lambda v: (float(v[:-2]) * 1e-3 if v.endswith("ms") else
                      float(v[:-3]) * 60 if v.endswith("min") else float(v.rstrip("s")))
    watchdog, restart_sec = usec(p["WatchdogUSec"]), usec(p["RestartUSec"])
    cursor = journal_cursor()
    # The journal stamps lines with CLOCK_MONOTONIC, the same clock as time.monotonic() here
    # (one kernel): systemd's own timestamps measure the watchdog, not this test's polling.
    t_stop = time.monotonic()
    in_root("systemctl", "kill", "--kill-who=main", "--signal=SIGSTOP", UNIT)
    limit = watchdog + restart_sec
    st = eventually(lambda: (lambda s: s if s["MainPID"] not in ("0", main_pid) else None)(
                    show("MainPID", "NRestarts")), limit + 60, "restart after SIGSTOP")
    lines = journal(cursor).splitlines()
    first = lambda pattern: next((mono(l) for l in lines if re.search(pattern, l)), None)
    fired = first(r"Watchdog timeout")
    restarted = first(r"systemd\[1\]: Starting gatewayd")
    check(fired is not None and restarted is not None and
          int(st["NRestarts"]) == int(p["NRestarts"]) + 1,
          f"SIGSTOP: the watchdog ({p['WatchdogUSec']}) killed it and systemd restarted it")
    # 1 s for systemd's timer accuracy and journald's stamping on a loaded machine.
    check(fired - t_stop <= watchdog + 1 and restarted - t_stop <= limit + 1,
          f"watchdog fired {fired - t_stop:.1f} s and the restart began {restarted - t_stop:.1f} s "
          f"after SIGSTOP: within WatchdogSec {watchdog:g} s + RestartSec {restart_sec:g} s")
    eventually(lambda: show("ActiveState")["ActiveState"] == "active", 30, "active again")
    delivered(supplier_port, "orders.eu.created", billing, 30, "after-watchdog")
    check(True, "traffic resumes after the watchdog restart")

    # --- stop: drains and exits 0 ------------------------------------------------------------
    status = in_root("systemctl", "status", UNIT, "--no-pager", "-l", "-n", "25", ok=False).stdout
    print("---- systemctl status gatewayd (before stop) ----\n" + status +
          "---- end of status ----", flush=True)
    cursor = journal_cursor()
    in_root("systemctl", "stop", UNIT, timeout=60)
    st = show("ActiveState", "Result", "ExecMainCode", "ExecMainStatus")
    check(st["ActiveState"] == "inactive" and st["Result"] == "success" and
          st["ExecMainCode"] == "1" and st["ExecMainStatus"] == "0",
          f"systemctl stop: exited with status 0 ({st})")
    drained = eventually(lambda: re.search(r"drain finished[^\n]*", journal(cursor)), 15,
                         "the drain summary in the journal")
    check(True, f"the journal shows the drain summary: {drained.group(0)}")
    check(not billing.corrupt and not audit.corrupt, "consumers never saw a malformed byte")

    # --- the operator's configuration survives a reinstall (conffiles) ---------------------
    conffiles = in_root("dpkg-query", "-W", "-f=${Conffiles}", "gatewayd").stdout
    check("/etc/gatewayd/gatewayd.toml" in conffiles and "/etc/gatewayd/routes.toml" in conffiles,
          "both configuration files are conffiles")
    deb = "/var/tmp/" + next(n for n in os.listdir(ROOT + "/var/tmp") if n.endswith(".deb"))
    in_root("dpkg", "-i", deb, timeout=300)
    kept = open(ROOT + "/etc/gatewayd/routes.toml").read()
    check(kept.startswith("# written by tests/systemd/drive.py"),
          "reinstalling the package keeps the edited routes.toml")
    check(show("ActiveState")["ActiveState"] == "inactive",
          "reinstalling does not start a stopped service")
    billing.close()
    audit.close()


if __name__ == "__main__":
    try:
        main()
    except (Failure, subprocess.TimeoutExpired) as e:
        log(f"FAIL: {e}")
        try:
            print(in_root("systemctl", "status", UNIT, "--no-pager", "-l", ok=False).stdout)
            print(in_root("journalctl", "-u", UNIT, "--no-pager", "-n", "60", ok=False).stdout)
        except Exception as e2:  # the diagnosis must not hide the failure
            log(f"(no diagnostics: {e2})")
        sys.exit(1)
    log("all checks passed")
