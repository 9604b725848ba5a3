"""Every process the benchmark starts: recorded by PID and ended by that PID (SIGTERM, then
SIGKILL), also when the run is interrupted. Nothing is ever ended by name."""

import atexit
import os
import signal
import subprocess
import sys
import time

started = {}  # pid -> Popen


def start(cmd, out_path, err_path=None):
    """Starts cmd with stdout to out_path and stderr to err_path (or to out_path too)."""
    out = open(out_path, "wb")
    err = open(err_path, "wb") if err_path else subprocess.STDOUT
    try:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    finally:
        out.close()
        if err_path:
            err.close()
    started[p.pid] = p
    return p


def reap(p, timeout):
    """Waits for p to exit (SIGKILL after timeout); returns its rusage."""
    deadline = time.time() + timeout
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            started.pop(p.pid, None)
            return usage
        if time.time() >= deadline:
            os.kill(p.pid, signal.SIGKILL)
            deadline = time.time() + 5
        time.sleep(0.02)


def end(p, timeout=10.0):
    """SIGTERM the process we started, wait, SIGKILL if needed; returns its rusage."""
    if p.pid not in started:
        return None
    if p.returncode is not None:  # Popen.poll() reaped it already: nothing left to end
        started.pop(p.pid, None)
        return None
    # Asks without reaping (Popen.poll() would reap it, and its rusage with it).
    if os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        try:
            os.kill(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return reap(p, timeout)


def end_all():
    for p in list(started.values()):
        try:
            end(p, 3.0)
        except (ChildProcessError, ProcessLookupError):
            started.pop(p.pid, None)


def install_handlers():
    """Ends everything still running when the benchmark exits, however it exits."""
    atexit.register(end_all)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
