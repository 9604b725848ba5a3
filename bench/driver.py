#!/usr/bin/env python3
"""bench/run's driver: starts gatewayd and gateway-peer processes on 127.0.0.1 for each
scenario, measures them (throughput, latency, CPU, context switches, RSS, promotion
latency) and writes Markdown tables and gnuplot PNGs to bench/results/.

Every process it starts is recorded by PID and ended by that PID (SIGTERM, then SIGKILL),
also when the run is interrupted. Python 3 standard library only.
"""

import argparse
import atexit
import datetime
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")

# --------------------------------------------------------------------------- processes

started = {}  # pid -> Popen


def start(cmd, log_path):
    log = open(log_path, "wb")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    started[p.pid] = p
    return p


def start_split(cmd, out_path, err_path):
    out, err = open(out_path, "wb"), open(err_path, "wb")
    p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    out.close()
    err.close()
    started[p.pid] = p
    return p


def end(p, timeout=10.0):
    """SIGTERM the process we started, wait, SIGKILL if needed; returns its rusage."""
    if p.pid not in started:
        return None
    if p.poll() is None:
        try:
            os.kill(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return reap(p, timeout)


def reap(p, timeout):
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


def end_all():
    for p in list(started.values()):
        try:
            end(p, 3.0)
        except (ChildProcessError, ProcessLookupError):
            started.pop(p.pid, None)


atexit.register(end_all)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
signal.signal(signal.SIGINT, lambda *_: sys.exit(130))

# --------------------------------------------------------------------------- /proc


def cpu_seconds(pid):
    """utime+stime of every thread of pid, in seconds (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


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


def wait_for(path, pattern, timeout, count=1):
    """The first match of `pattern` in the file once it matches `count` times, else None."""
    deadline = time.time() + timeout
    rx = re.compile(pattern)
    while time.time() < deadline:
        try:
            with open(path, errors="replace") as f:
                matches = rx.findall(f.read())
            if len(matches) >= count:
                return matches[0]
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    return None


# --------------------------------------------------------------------------- metrics


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def metric_sum(text, name):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def promotion_p99_us(text):
    """p99 of gatewayd_lf_promotion_latency_seconds: the upper bound of the bucket holding it."""
    buckets = []
    for line in text.splitlines():
        m = re.match(r'gatewayd_lf_promotion_latency_seconds_bucket\{.*le="([^"]+)"\} (\S+)', line)
        if m:
            le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
            buckets.append((le, float(m.group(2))))
    if not buckets or buckets[-1][1] == 0:
        return None, 0
    buckets.sort()
    total = buckets[-1][1]
    for le, n in buckets:
        if n >= 0.99 * total:
            return le * 1e6, int(total)
    return None, int(total)


# --------------------------------------------------------------------------- one case


class Bench:
    def __init__(self, args):
        self.args = args
        self.gatewayd = os.path.join(args.build_dir, "gateway", "gatewayd")
        self.peer = os.path.join(args.build_dir, "tools", "gateway-peer")
        self.work = tempfile.mkdtemp(prefix="gatewayd-bench-")
        self.seq = 0

    def path(self, name):
        self.seq += 1
        return os.path.join(self.work, f"{self.seq:03d}-{name}")

    def check_model(self, keys):
        """True when gatewayd --check accepts the model's [gateway] keys."""
        cfg = self.write_config(keys, {"probe": ["c"]}, {"c": ("127.0.0.1:9", "")}, 0)
        r = subprocess.run([self.gatewayd, "--check", "--config", cfg], capture_output=True,
                           text=True, timeout=30)
        return r.returncode == 0, (r.stdout + r.stderr).strip()

    def write_config(self, model_keys, routes, consumers, max_suppliers, dead_letter=None):
        d = self.path("config")
        os.makedirs(d)
        lines = ["[consumers.%s]\nendpoint = \"%s\"\n%s\n" % (n, ep, extra)
                 for n, (ep, extra) in consumers.items()]
        for match, to in routes.items():
            lines.append("[[routes]]\nmatch = \"%s\"\nto = [%s]\n" %
                         (match, ", ".join('"%s"' % t for t in to)))
        with open(os.path.join(d, "routes.toml"), "w") as f:
            f.write("\n".join(lines))
        gw = ['supplier_listen = "127.0.0.1:0"', 'routes_file = "routes.toml"',
              "threads = %d" % self.args.threads, "drain_timeout_ms = 1000",
              "idle_timeout_ms = 0"]
        if max_suppliers:
            gw.append("max_supplier_connections = %d" % max_suppliers)
        gw += ["%s = %s" % kv for kv in model_keys]
        with open(os.path.join(d, "gatewayd.toml"), "w") as f:
            f.write("[gateway]\n" + "\n".join(gw) +
                    '\n\n[metrics]\nlisten = "127.0.0.1:0"\n\n[log]\nlevel = "info"\n')
        return os.path.join(d, "gatewayd.toml")

    def run_case(self, name, model_keys, groups, routes, senders, seconds, stall=None,
                 consumer_extra="", idle_suppliers=0):
        """groups: {recv_group: [consumer names]}; senders: list of dicts(address, size,
        rate, connections). Returns a dict of measurements."""
        stall = stall or {}
        receivers = {}
        for g in groups:
            out, err = self.path(f"{name}-{g}.json"), self.path(f"{name}-{g}.err")
            cmd = [self.peer, "recv", "--listen", "127.0.0.1:0", "--json"]
            if g in stall:
                cmd += ["--stall-after", str(stall[g])]
            p = start_split(cmd, out, err)
            port = wait_for(err, r"listening on 127\.0\.0\.1:(\d+)", 10)
            if port is None:
                raise RuntimeError(f"{name}: gateway-peer recv did not start")
            receivers[g] = (p, out, err, int(port))
        consumers = {}
        for g, names in groups.items():
            extra = consumer_extra(g) if callable(consumer_extra) else consumer_extra
            for n in names:
                consumers[n] = ("127.0.0.1:%d" % receivers[g][3], extra)
        cfg = self.write_config(model_keys, routes, consumers,
                                idle_suppliers + 100 if idle_suppliers else 0)
        glog = self.path(f"{name}-gatewayd.log")
        gw = start([self.gatewayd, "--config", cfg], glog)
        sport = wait_for(glog, r"listening for suppliers on 127\.0\.0\.1:(\d+)", 20)
        mport = wait_for(glog, r"metrics on 127\.0\.0\.1:(\d+)", 10)
        if sport is None:
            raise RuntimeError(f"{name}: gatewayd did not start: see {glog}")
        if wait_for(glog, r"consumer \S+ connected", 60, count=len(consumers)) is None:
            raise RuntimeError(f"{name}: consumers did not all connect: see {glog}")
        res = {"name": name}
        # What the daemon says it runs, e.g. "(2 threads, leader-followers)": a model key the
        # build does not implement yet shows up here rather than as a silently equal row.
        res["runs"] = wait_for(glog, r"listening for suppliers on \S+ \(([^)]*)\)", 1) or "?"
        self.metrics_port = mport
        if idle_suppliers:
            res.update(self.idle_connections(gw, int(sport), idle_suppliers))
        rss_before = status_kib(gw.pid, "VmRSS")
        cpu0 = cpu_seconds(gw.pid)
        busy0 = system_busy_seconds()
        ctx0 = ctx_switches(gw.pid)
        rcpu0 = sum(cpu_seconds(r[0].pid) for r in receivers.values())
        t0 = time.time()
        procs = []
        for s in senders:
            cmd = [self.peer, "send", "--to", "127.0.0.1:%s" % sport, "--address", s["address"],
                   "--size", str(s.get("size", 128)), "--duration", str(seconds), "--json",
                   "--connections", str(s.get("connections", 1))]
            if s.get("rate"):
                cmd += ["--rate", str(s["rate"])]
            out = self.path(f"{name}-send.json")
            procs.append((start_split(cmd, out, out + ".err"), out))
        sender_cpu = 0.0
        sent = 0
        sent_rate = 0.0
        for p, out in procs:
            usage = reap(p, seconds + 60)
            sender_cpu += usage.ru_utime + usage.ru_stime
            with open(out) as f:
                js = json.loads(f.read() or "{}")
            sent += js.get("frames", 0)
            sent_rate += js.get("frames_per_s", 0.0)
        time.sleep(0.5)  # let the queues drain into the receivers
        wall = time.time() - t0
        gw_cpu = cpu_seconds(gw.pid) - cpu0
        busy = system_busy_seconds() - busy0
        ctx1 = ctx_switches(gw.pid)
        recv_cpu = sum(cpu_seconds(r[0].pid) for r in receivers.values()) - rcpu0
        metrics = scrape(mport) if mport else ""
        res["peak_rss_kib"] = status_kib(gw.pid, "VmHWM")
        res["rss_kib"] = status_kib(gw.pid, "VmRSS")
        res["rss_before_kib"] = rss_before
        end(gw)
        recv = {}
        for g, (p, out, err, _) in receivers.items():
            end(p)
            with open(out) as f:
                text = f.read()
            recv[g] = json.loads(text) if text.strip() else {}
        delivered = sum(r.get("frames", 0) for r in recv.values())
        res.update({
            "sent": sent, "sent_per_s": sent_rate, "delivered": delivered,
            "deliveries_per_s": sum(r.get("frames_per_s", 0.0) for r in recv.values()),
            "mb_per_s": sum(r.get("mb_per_s", 0.0) for r in recv.values()),
            "receivers": recv, "wall": wall, "gw_cpu": gw_cpu,
            "tools_cpu": sender_cpu + recv_cpu, "machine_busy": busy, "sender_cpu": sender_cpu, "recv_cpu": recv_cpu,
            "ctx_vol": ctx1[0] - ctx0[0], "ctx_nonvol": ctx1[1] - ctx0[1],
            "dropped": metric_sum(metrics, "gatewayd_consumer_dropped_messages_total"),
            "unroutable": metric_sum(metrics, "gatewayd_messages_unroutable_total"),
            "received_by_gw": metric_sum(metrics, "gatewayd_supplier_messages_received_total"),
            "lost": sum(r.get("lost", 0) for r in recv.values()),
            "dup": sum(r.get("duplicated", 0) for r in recv.values()),
            "reordered": sum(r.get("reordered", 0) for r in recv.values()),
            "corrupt": sum(r.get("corrupt", 0) for r in recv.values()),
        })
        res["promotion_p99_us"], res["promotions"] = promotion_p99_us(metrics)
        lat = [r["latency_ns"] for r in recv.values() if r.get("latency_ns", {}).get("count")]
        for q in ("p50", "p99", "p999", "max"):
            res[q + "_us"] = max((l[q] for l in lat), default=0) / 1e3
        msgs = max(delivered, 1)
        res["ctx_per_msg"] = (res["ctx_vol"] + res["ctx_nonvol"]) / msgs
        print("  %-28s %s" % (name, one_line(res)), flush=True)
        return res

    def idle_connections(self, gw, port, n):
        """Opens n idle supplier connections, measures the gateway's RSS, closes them."""
        base = status_kib(gw.pid, "VmRSS")
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            socks.append(s)
        # The gateway accepts asynchronously: wait for its metric to show them all.
        time.sleep(2.0)
        rss = status_kib(gw.pid, "VmRSS")
        hwm = status_kib(gw.pid, "VmHWM")
        accepted = metric_sum(scrape(self.metrics_port), "gatewayd_supplier_connections")
        for s in socks:
            s.close()
        return {"idle": n, "idle_rss_kib": rss, "idle_base_rss_kib": base, "idle_hwm_kib": hwm,
                "idle_accepted": int(accepted)}


def one_line(r):
    return ("%.2fM deliveries/s, %.0f MB/s, sent %.2fM/s, p50 %.0f us p99 %.0f us, "
            "gw cpu %.2f, tools cpu %.2f, drops %d, lost %d, corrupt %d" % (
                r["deliveries_per_s"] / 1e6, r["mb_per_s"], r["sent_per_s"] / 1e6, r["p50_us"],
                r["p99_us"], r["gw_cpu"] / r["wall"], r["tools_cpu"] / r["wall"], r["dropped"],
                r["lost"], r["corrupt"]))


# --------------------------------------------------------------------------- scenarios

LOSSLESS = 'queue_capacity = 100000\noverflow = "backpressure"'


def s1(b, keys, secs, size=128, name="S1"):
    return b.run_case(name, keys, {"c1": ["c1"]}, {"s1.>": ["c1"]},
                      [{"address": "s1.data", "size": size}], secs, consumer_extra=LOSSLESS)


def s2(b, keys, secs):
    groups = {f"c{i}": [f"c{i}"] for i in range(1, 5)}
    return b.run_case("S2", keys, groups, {"s2.>": list(groups)},
                      [{"address": "s2.data"}], secs, consumer_extra=LOSSLESS)


def s3(b, keys, secs, name="S3"):
    groups = {f"c{i}": [f"c{i}"] for i in range(1, 5)}
    routes = {f"s3.{i}": [f"c{i}"] for i in range(1, 5)}
    senders = [{"address": f"s3.{i}"} for i in range(1, 5)]
    return b.run_case(name, keys, groups, routes, senders, secs, consumer_extra=LOSSLESS)


def s4(b, keys, secs, rate, name=None):
    return b.run_case(name or f"S4-{rate // 1000}k", keys, {"c1": ["c1"]}, {"s4.>": ["c1"]},
                      [{"address": "s4.data", "rate": rate}], secs, consumer_extra=LOSSLESS)


S5_RATE = 200000


def s5(b, keys, secs, stalled):
    groups = {f"c{i}": [f"c{i}"] for i in range(1, 5)}
    # drop-oldest with a byte bound: the stalled consumer's queue is what may grow. Paced so
    # that healthy consumers keep up without the stall: at the maximum rate drop-oldest
    # drops for every consumer that is slower than the supplier, which hides isolation.
    extra = 'queue_capacity = 1000000\nqueue_bytes = 16777216\noverflow = "drop-oldest"'
    return b.run_case("S5-stall" if stalled else "S5-nostall", keys, groups,
                      {"s5.>": list(groups)}, [{"address": "s5.data", "rate": S5_RATE}],
                      max(secs, 4.0),
                      stall={"c4": 1.0} if stalled else None, consumer_extra=extra)


def s6(b, keys, secs, n):
    names = [f"c{i}" for i in range(n)]
    return b.run_case(f"S6-{n}", keys, {"all": names}, {"s6.>": names},
                      [{"address": "s6.data"}], secs,
                      consumer_extra='queue_capacity = 10000\noverflow = "backpressure"')


def s6_idle(b, keys, n):
    return b.run_case("S6-idle", keys, {"c1": ["c1"]}, {"s6.>": ["c1"]},
                      [{"address": "s6.data", "rate": 1000}], 1, idle_suppliers=n)


# --------------------------------------------------------------------------- reports


def mib(kib):
    return kib / 1024.0


def cpu_split(r):
    """gatewayd / load tools / everything else on the machine, in cores (of os.cpu_count())."""
    others = max(0.0, r["machine_busy"] - r["gw_cpu"] - r["tools_cpu"])
    return "%.2f / %.2f / %.2f" % (r["gw_cpu"] / r["wall"], r["tools_cpu"] / r["wall"],
                                   others / r["wall"])


def table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


THROUGHPUT_HEAD = ["case", "delivered/s", "MB/s", "sent/s", "p50 us", "p99 us",
                   "CPU gatewayd / tools / others (cores)", "ctx sw/msg", "drops", "lost", "corrupt"]


def throughput_row(r, label=None):
    return [label or r["name"], "%.2fM" % (r["deliveries_per_s"] / 1e6), "%.0f" % r["mb_per_s"],
            "%.2fM" % (r["sent_per_s"] / 1e6), "%.0f" % r["p50_us"], "%.0f" % r["p99_us"],
            cpu_split(r), "%.4f" % r["ctx_per_msg"], "%d" % r["dropped"], "%d" % r["lost"],
            "%d" % r["corrupt"]]


class Report:
    def __init__(self, out_dir, stamp):
        self.out_dir = out_dir
        self.stamp = stamp
        self.sections = []

    def write(self, scenario, title, body):
        path = os.path.join(self.out_dir, f"{self.stamp}-{scenario}.md")
        with open(path, "w") as f:
            f.write(f"# {title}\n\n{body}")
        self.sections.append((title, body))
        print(f"wrote {os.path.relpath(path, ROOT)}", flush=True)

    def plot(self, name, title, xlabel, ylabel, series, logx=False):
        """series: [(label, [(x, y), ...])]; writes NAME.png (and its .dat) if gnuplot exists."""
        if not shutil.which("gnuplot"):
            return None
        dat = os.path.join(self.out_dir, f"{self.stamp}-{name}.dat")
        png = os.path.join(self.out_dir, f"{self.stamp}-{name}.png")
        with open(dat, "w") as f:
            for label, pts in series:
                f.write(f"# {label}\n")
                for x, y in pts:
                    f.write(f"{x} {y}\n")
                f.write("\n\n")
        plots = ", ".join(f"'{dat}' index {i} with linespoints lw 2 title '{label}'"
                          for i, (label, _) in enumerate(series))
        script = (f"set terminal png size 900,540\nset output '{png}'\nset title '{title}'\n"
                  f"set xlabel '{xlabel}'\nset ylabel '{ylabel}'\nset grid\nset key left top\n"
                  + ("set logscale x 2\n" if logx else "") + f"plot {plots}\n")
        subprocess.run(["gnuplot"], input=script, text=True, check=False)
        return os.path.relpath(png, self.out_dir)


def machine():
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    keep = ("Architecture", "CPU(s):", "Model name", "Thread(s) per core", "Core(s) per socket",
            "L1d", "L2", "L3", "Hypervisor vendor", "CPU max MHz")
    lines = [l.strip() for l in lscpu.splitlines() if l.strip().startswith(keep)]
    return ("```\n" + "\n".join(lines) + "\nkernel: " + platform.release() +
            "\nload average at start: " + " ".join(open("/proc/loadavg").read().split()[:3]) +
            "\n```\n")


# --------------------------------------------------------------------------- main


def load_models(path):
    models = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip() if not line.strip().startswith("#") else ""
            if not line:
                continue
            name, *kvs = line.split()
            models.append((name, [tuple(kv.split("=", 1)) for kv in kvs]))
    return models


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=0, help="gateway threads (0 = one per core)")
    ap.add_argument("--scenarios", default="S1 S2 S3 S4 S5 S6 sweep models")
    ap.add_argument("--models", default="")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    b = Bench(args)
    want = set(args.scenarios.split())
    secs = args.seconds
    models = load_models(os.path.join(ROOT, "bench", "models.txt"))
    if args.models:
        models = [m for m in models if m[0] in args.models.split()]
    default_name, default_keys = models[0]
    rep = Report(args.out, datetime.date.today().isoformat())
    t_start = time.time()
    print(f"bench: gatewayd {b.gatewayd}, model {default_name}, {secs:g} s per scenario",
          flush=True)

    if "S1" in want:
        r = s1(b, default_keys, secs)
        rep.write("S1", "S1: 1 supplier -> 1 consumer, 128 B payloads, max rate",
                  table(THROUGHPUT_HEAD, [throughput_row(r)]) +
                  "\nL/F promotion latency p99: %s us over %d promotions.\n" % (
                      fmt(r["promotion_p99_us"]), r["promotions"]))
    if "S2" in want:
        r = s2(b, default_keys, secs)
        rep.write("S2", "S2: fan-out 1 -> 4, 128 B, max rate",
                  table(THROUGHPUT_HEAD, [throughput_row(r)]) + per_receiver(r))
    if "S3" in want:
        r = s3(b, default_keys, secs)
        rep.write("S3", "S3: 4 suppliers -> 4 consumers (one route each), 128 B, max rate",
                  table(THROUGHPUT_HEAD, [throughput_row(r)]) + per_receiver(r))
    if "S4" in want:
        rows = []
        for rate in (20000, 100000):
            r = s4(b, default_keys, secs, rate)
            rows.append([f"{rate // 1000}k frames/s", "%.0f" % r["p50_us"], "%.0f" % r["p99_us"],
                         "%.0f" % r["p999_us"], "%.0f" % r["max_us"],
                         fmt(r["promotion_p99_us"]), cpu_split(r), "%.3f" % r["ctx_per_msg"],
                         "%d" % r["lost"]])
        rep.write("S4", "S4: latency at fixed rates, 1 -> 1, 128 B",
                  table(["rate", "p50 us", "p99 us", "p99.9 us", "max us",
                         "promotion p99 us", "CPU gatewayd / tools / others", "ctx sw/msg", "lost"], rows))
    if "S5" in want:
        base = s5(b, default_keys, secs, False)
        stall = s5(b, default_keys, secs, True)
        rep.write("S5", "S5: isolation: S2 (paced at %dk frames/s) with consumer 4 stalled "
                  "after 1 s" % (S5_RATE // 1000), s5_report(base, stall))
    if "S6" in want:
        rows, pts = [], []
        for n in (1, 10, 100, 1000):
            r = s6(b, default_keys, secs, n)
            rows.append([n, "%.2fM" % (r["deliveries_per_s"] / 1e6),
                         "%.2fM" % (r["sent_per_s"] / 1e6), "%.1f" % mib(r["peak_rss_kib"]),
                         cpu_split(r), "%d" % r["lost"], "%d" % r["corrupt"]])
            pts.append((n, r["deliveries_per_s"] / 1e6))
        idle = s6_idle(b, default_keys, 10000)
        png = rep.plot("S6", "S6: deliveries/s vs consumers (fan-out of every frame)",
                       "consumers", "M deliveries/s", [("deliveries/s", pts)], logx=True)
        body = table(["consumers (all get every frame)", "deliveries/s", "frames in/s",
                      "gatewayd peak RSS MiB", "CPU gatewayd / tools / others", "lost", "corrupt"], rows)
        body += ("\n10,000 idle supplier connections (%d open at the gateway, by its "
                 "gatewayd_supplier_connections): gatewayd RSS %.1f MiB with them open "
                 "(%.1f MiB before they connected: %.1f KiB per connection).\n" % (
                     idle["idle_accepted"], mib(idle["idle_rss_kib"]), mib(idle["idle_base_rss_kib"]),
                     (idle["idle_rss_kib"] - idle["idle_base_rss_kib"]) / idle["idle"]))
        if png:
            body += f"\n![S6]({png})\n"
        rep.write("S6", "S6: scale", body)
    if "sweep" in want:
        rows, fps, mbs = [], [], []
        for size in (16, 64, 128, 256, 1024, 4096, 16384, 65536):
            r = s1(b, default_keys, min(secs, 3.0), size, name=f"S1-{size}B")
            rows.append(throughput_row(r, f"{size} B"))
            fps.append((size, r["deliveries_per_s"] / 1e6))
            mbs.append((size, r["mb_per_s"] / 1e3))
        png = rep.plot("sweep", "S1 payload sweep: 1 -> 1, max rate", "payload bytes",
                       "M frames/s  |  GB/s", [("M frames/s", fps), ("GB/s", mbs)], logx=True)
        rep.write("sweep", "S1 payload sweep (16 B .. 64 KiB, 3 s each)",
                  table(["payload"] + THROUGHPUT_HEAD[1:], rows) +
                  (f"\n![payload sweep]({png})\n" if png else ""))
    if "models" in want:
        rows = []
        for name, keys in models:
            ok, why = b.check_model(keys)
            if not ok:
                rows.append([name, "skipped: gatewayd --check refuses it: " +
                             why.splitlines()[-1] if why else "?"] + [""] * 9)
                continue
            r1, r3, r4 = s1(b, keys, secs, name=f"M-{name}-S1"), s3(b, keys, secs, name=f"M-{name}-S3"), \
                s4(b, keys, secs, 100000, name=f"M-{name}-S4")
            rows.append([name, r1["runs"], "%.2fM" % (r1["deliveries_per_s"] / 1e6),
                         "%.2fM" % (r3["deliveries_per_s"] / 1e6),
                         "%.0f" % r4["p50_us"], "%.0f" % r4["p99_us"], "%.0f" % r4["p999_us"],
                         "%.4f / %.4f" % (r1["ctx_per_msg"], r4["ctx_per_msg"]),
                         cpu_split(r1), fmt(r4["promotion_p99_us"])])
        rep.write("models", "Concurrency models: S1, S3 and S4 (100k frames/s) per model",
                  table(["model", "gatewayd runs", "S1 frames/s", "S3 frames/s", "S4 p50 us", "S4 p99 us",
                         "S4 p99.9 us", "ctx sw/msg S1 / S4", "S1 CPU gatewayd / tools / others",
                         "S4 promotion p99 us"], rows) +
                  "\nModels come from bench/models.txt ([gateway] keys per model).\n")

    summary = [f"# gatewayd benchmark, {rep.stamp}\n", "## Machine\n", machine(),
               "\nCPU columns: cores used on average over the load window by gatewayd, by the "
               "gateway-peer senders + receivers, and by everything else on the machine "
               "(/proc/stat busy time minus the first two); the machine has %d.\n" % os.cpu_count(),
               "Run time: %.0f s.\n" % (time.time() - t_start)]
    for title, body in rep.sections:
        summary.append(f"\n## {title}\n\n{body}")
    path = os.path.join(args.out, f"{rep.stamp}-summary.md")
    with open(path, "w") as f:
        f.write("".join(summary))
    print(f"wrote {os.path.relpath(path, ROOT)} ({time.time() - t_start:.0f} s)")
    shutil.rmtree(b.work, ignore_errors=True)


def fmt(v):
    return "n/a" if v is None else "%.1f" % v


def per_receiver(r):
    rows = [[g, "%.2fM" % (x.get("frames_per_s", 0) / 1e6), "%.0f" % (x["latency_ns"]["p99"] / 1e3),
             x.get("lost", 0)] for g, x in sorted(r["receivers"].items())]
    return "\n" + table(["consumer", "frames/s", "p99 us", "lost"], rows)


def healthy_worst_second(r):
    """Worst whole second of the healthy consumers (c1..c3), skipping the first and last
    (partial) seconds, and their mean frames/s."""
    worst, mean = None, []
    for g in ("c1", "c2", "c3"):
        ps = list(r["receivers"][g].get("per_second", []))
        while ps and ps[-1] == 0:  # the receiver outlives the sender
            ps.pop()
        ps = ps[1:-1]
        if ps:
            worst = min(ps) if worst is None else min(worst, min(ps))
            mean.append(sum(ps) / len(ps))
    return worst or 0, (sum(mean) / len(mean)) if mean else 0


def s5_report(base, stall):
    wb, mb = healthy_worst_second(base)
    ws, ms = healthy_worst_second(stall)
    p99b = max(base["receivers"][g]["latency_ns"]["p99"] for g in ("c1", "c2", "c3")) / 1e3
    p99s = max(stall["receivers"][g]["latency_ns"]["p99"] for g in ("c1", "c2", "c3")) / 1e3
    rows = [["without stall", "%.2fM" % (mb / 1e6), "%.2fM" % (wb / 1e6), "%.0f" % p99b,
             "%.1f" % mib(base["peak_rss_kib"]), "%d" % base["dropped"], cpu_split(base)],
            ["c4 stalled after 1 s", "%.2fM" % (ms / 1e6), "%.2fM" % (ws / 1e6), "%.0f" % p99s,
             "%.1f" % mib(stall["peak_rss_kib"]), "%d" % stall["dropped"], cpu_split(stall)]]
    body = table(["run", "healthy mean frames/s (each)", "healthy worst second", "healthy p99 us",
                  "gatewayd peak RSS MiB", "drops (all reasons)", "CPU gatewayd / tools / others"], rows)
    ratio = ws / mb if mb else 0
    body += ("\nHealthy worst second with the stall / healthy mean without it: %.0f%% "
             "(target >= 95%%). Healthy p99 ratio: %.2fx (target <= 1.5x). Stalled consumer's "
             "queue bound: 16 MiB (queue_bytes), so the RSS target is <= 16 + 32 MiB over the "
             "run without a stall: measured %+.1f MiB.\n" % (
                 100 * ratio, p99s / p99b if p99b else 0,
                 mib(stall["peak_rss_kib"] - base["peak_rss_kib"])))
    return body


if __name__ == "__main__":
    main()
