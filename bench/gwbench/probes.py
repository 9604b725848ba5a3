"""What the benchmark reads: /proc (CPU, context switches, memory) of the processes it
started, gatewayd's ports file, gateway-peer's listening line, and /metrics samples."""

import json
import os
import re
import time
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")

# --------------------------------------------------------------------------- /proc


def cpu_seconds(pid, user_only=False):
    """utime+stime of every thread of pid, in seconds (/proc/PID/stat fields 14 and 15); with
    user_only, utime alone: the process's own code, without the kernel's work for it."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + (0 if user_only else int(fields[12]))) / CLK_TCK


def system_busy_seconds():
    """CPU seconds the whole machine spent busy (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / CLK_TCK


def ctx_switches(pid):
    """(voluntary, nonvoluntary) context switches summed over the threads of pid."""
    vol = nonvol = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        nonvol += int(line.split()[1])
        except FileNotFoundError:
            pass
    return vol, nonvol


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


# --------------------------------------------------------------------------- start-up


def listening_port(err_path, timeout):
    """The port gateway-peer recv chose: its documented 'listening on HOST:PORT' line."""
    deadline = time.time() + timeout
    rx = re.compile(r"listening on 127\.0\.0\.1:(\d+)")
    while time.time() < deadline:
        try:
            with open(err_path, errors="replace") as f:
                m = rx.search(f.read())
            if m:
                return int(m.group(1))
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    return None


def ports_file(path, proc, timeout):
    """gatewayd's --ports-file once the process proc started has written it (a file left by
    another pid does not count): {"pid", "supplier", "metrics"}; None if it never came."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        try:
            with open(path) as f:
                ports = json.load(f)
            if ports.get("pid") == proc.pid:
                return ports
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.05)
    return None


def port_of(endpoint):
    """The port of "HOST:PORT" (or None)."""
    return int(endpoint.rsplit(":", 1)[1]) if endpoint else None


# --------------------------------------------------------------------------- metrics

SAMPLE = re.compile(r'^(\w+)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'(\w+)="([^"]*)"')


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def samples(text, name):
    """[(labels dict, value)] of every sample of metric `name`."""
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and m.group(1) == name:
            out.append((dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def metric_sum(text, name):
    return sum(v for _, v in samples(text, name))


def sums_by(text, name, label):
    """{label value: sum of the samples carrying it}, e.g. drops by reason."""
    out = {}
    for labels, v in samples(text, name):
        key = labels.get(label, "")
        out[key] = out.get(key, 0.0) + v
    return out


def readyz_ms(port):
    """One GET /readyz: (HTTP status, milliseconds it took)."""
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as r:
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    return status, (time.perf_counter() - t0) * 1e3


def consumers_connected(port, names, timeout):
    """True once gatewayd_consumer_connected is 1 for every named consumer; a name "g/h:p" is
    the member h:p of the group g."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        up = set()
        for l, v in samples(scrape(port), "gatewayd_consumer_connected"):
            if v == 1:
                up.add(l.get("consumer") + ("/" + l["member"] if l.get("member") else ""))
        if set(names) <= up:
            return True
        time.sleep(0.05)
    return False


def promotion_p99_us(text):
    """p99 of gatewayd_lf_promotion_latency_seconds: the upper bound of the bucket holding it,
    and the number of promotions."""
    buckets = sorted((float("inf") if l["le"] == "+Inf" else float(l["le"]), v)
                     for l, v in samples(text, "gatewayd_lf_promotion_latency_seconds_bucket"))
    if not buckets or buckets[-1][1] == 0:
        return None, 0
    total = buckets[-1][1]
    return next(le * 1e6 for le, n in buckets if n >= 0.99 * total), int(total)
