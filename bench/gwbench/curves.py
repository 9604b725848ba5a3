"""bench/curves' driver: what gatewayd costs as one dimension of its load grows, the others held
small, for an operator sizing a node (docs/cost-curves.md): routes (check, start, reload, RSS),
distinct addresses (rate, CPU per frame), consumers (connect time, idle RSS per consumer,
fan-out rate) and supplier connections at a fixed total rate (CPU, RSS, latency, /readyz).
Prints Markdown tables and writes them to --out."""

import argparse
import dataclasses
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

from . import probes, procs, report, scenarios
from .harness import Case, Harness, Sender

ROUTES = (1000, 10000, 30000, 100000)
ADDRESSES = (1, 16, 256, 4096, 65536, 1000000)
CONSUMERS = (10, 100, 300, 1000)
SUPPLIERS = (1, 10, 100, 1000, 5000)
SUPPLIER_RATE = 100000  # frames/s over all the supplier connections
RELOADS = 3


def wait_for(predicate, timeout, step=0.01):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


# ----------------------------------------------------------------------------- routes


def write_routes(path, n, endpoint):
    """n routes to one consumer, half exact (r.<i>.created), half wildcard (w.<i>.*.>), like
    issue 45's 100,000-route file."""
    with open(path, "w") as f:
        f.write(f'[consumers.c1]\nendpoint = "{endpoint}"\n\n')
        for i in range(n):
            match = f"r.{i}.created" if i % 2 == 0 else f"w.{i}.*.>"
            f.write(f'[[routes]]\nmatch = "{match}"\nto = ["c1"]\n\n')


def routes_curve(h, seconds):
    rows = [routes_point(h, n) for n in ROUTES]
    return report.table(["routes", "routes file MiB", "--check ms", "start ms",
                         "RSS after start MiB", f"reload ms (median of {RELOADS})",
                         f"RSS after {RELOADS} reloads MiB"], rows)


def routes_point(h, n):
    err = h.path(f"routes-{n}-recv.err")
    recv = procs.start([h.peer, "recv", "--listen", "127.0.0.1:0", "--json"],
                       h.path(f"routes-{n}-recv.json"), err)
    port = probes.listening_port(err, 10)
    d = h.path(f"routes-{n}")
    os.makedirs(d)
    routes = os.path.join(d, "routes.toml")
    write_routes(routes, n, f"127.0.0.1:{port}")
    cfg = os.path.join(d, "gatewayd.toml")
    with open(cfg, "w") as f:
        f.write('[gateway]\nsupplier_listen = "127.0.0.1:0"\nroutes_file = "routes.toml"\n'
                f'threads = {h.threads or 2}\nidle_timeout_ms = 0\n\n'
                '[metrics]\nlisten = "127.0.0.1:0"\n')
    t0 = time.perf_counter()
    subprocess.run([h.gatewayd, "--check", "--config", cfg], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    check_ms = (time.perf_counter() - t0) * 1e3

    ports_path = os.path.join(d, "ports.json")
    t0 = time.perf_counter()
    gw = procs.start([h.gatewayd, "--config", cfg, "--ports-file", ports_path],
                     os.path.join(d, "gateway.log"))
    ports = probes.ports_file(ports_path, gw, 120)
    mport = probes.port_of(ports["metrics"])
    wait_for(lambda: probes.readyz_ms(mport)[0] == 200, 120)
    start_ms = (time.perf_counter() - t0) * 1e3
    rss_start = probes.status_kib(gw.pid, "VmRSS")

    def reloads():
        return probes.metric_sum(probes.scrape(mport), "gatewayd_config_reloads_total")

    times = []
    for _ in range(RELOADS):
        before = reloads()
        t0 = time.perf_counter()
        os.kill(gw.pid, signal.SIGHUP)  # the gateway this run started
        wait_for(lambda: reloads() > before, 120)
        times.append((time.perf_counter() - t0) * 1e3)
    rss_reloaded = probes.status_kib(gw.pid, "VmRSS")
    procs.end(gw)
    procs.end(recv)
    size = os.path.getsize(routes) / 2**20
    return [f"{n:,}", "%.1f" % size, "%.0f" % check_ms, "%.0f" % start_ms,
            "%.0f" % report.mib(rss_start), "%.0f" % statistics.median(times),
            "%.0f" % report.mib(rss_reloaded)]


# -------------------------------------------------------------------------- addresses


def addresses_curve(h, seconds):
    rows, one = [], None
    for n in ADDRESSES:
        r = h.run(scenarios.addresses(n), seconds)
        one = one or r
        print("  %-28s %s" % (r["name"], report.one_line(r)), flush=True)
        rows.append([f"{n:,}", report.millions(r["deliveries_per_s"]),
                     "%.2fx" % (r["deliveries_per_s"] / one["deliveries_per_s"]),
                     "%.3f" % r["cpu_us_per_frame"], "%.3f" % r["user_us_per_frame"],
                     report.lost(r)])
    return report.table(["distinct addresses", "delivered/s", "of 1 address",
                         "gatewayd CPU us/frame", "user CPU us/frame", "lost"], rows)


# -------------------------------------------------------------------------- consumers


def consumers_curve(h, seconds):
    rows = []
    base = None
    for n in CONSUMERS:
        cs = scenarios.names(n, first=0)
        case = Case(f"C-{n}", {"all": cs}, {"f.>": cs}, [Sender(["f.data"])], fanout=n,
                    consumer_extra='queue_capacity = 10000\noverflow = "backpressure"')
        if base is None:
            base = idle_rss_kib(h)
        # The gateway's connect time and idle RSS: started on the case's configuration, timed
        # until every consumer is connected, measured before any frame.
        receivers = h.start_receivers(case)
        endpoints = {c: f"127.0.0.1:{port}" for _, _, port, names in receivers.values()
                     for c in names}
        cfg = h.write_config((), case.routes, endpoints, case.consumer_extra, 0)
        t0 = time.perf_counter()
        gw, _, mport = h.start_gateway(case.name, cfg, list(endpoints))
        connect_ms = (time.perf_counter() - t0) * 1e3
        time.sleep(0.5)
        rss = probes.status_kib(gw.pid, "VmRSS")
        procs.end(gw)
        for p, *_ in receivers.values():
            procs.end(p)
        r = h.run(case, seconds)
        print("  %-28s %s" % (r["name"], report.one_line(r)), flush=True)
        rows.append([f"{n:,}", "%.0f" % connect_ms, "%.1f" % report.mib(rss),
                     "%.1f" % ((rss - base) / n), report.millions(r["deliveries_per_s"]),
                     report.millions(r["sent_per_s"]), report.lost(r)])
    return report.table(["consumers", "connect all (ms, from start)", "idle RSS MiB",
                         "idle KiB per consumer", "fan-out deliveries/s", "frames in/s",
                         "lost"], rows)


def idle_rss_kib(h):
    """The gateway's RSS with one idle consumer: what the per-consumer figures are above."""
    case = Case("C-base", {"c1": ["c1"]}, {"f.>": ["c1"]}, [])
    receivers = h.start_receivers(case)
    endpoints = {c: f"127.0.0.1:{port}" for _, _, port, names in receivers.values() for c in names}
    cfg = h.write_config((), case.routes, endpoints, "", 0)
    gw, _, _ = h.start_gateway(case.name, cfg, list(endpoints))
    time.sleep(0.5)
    rss = probes.status_kib(gw.pid, "VmRSS")
    procs.end(gw)
    for p, *_ in receivers.values():
        procs.end(p)
    return rss


# -------------------------------------------------------------------------- suppliers


def suppliers_curve(h, seconds):
    rows = []
    for n in SUPPLIERS:
        case = dataclasses.replace(
            scenarios.one_to_one(f"P-{n}", rate=SUPPLIER_RATE),
            senders=[Sender(["s1.data"], rate=SUPPLIER_RATE, connections=n)],
            idle_suppliers=0)
        r = h.run(case, seconds)
        print("  %-28s %s" % (r["name"], report.one_line(r)), flush=True)
        rows.append([f"{n:,}", report.millions(r["deliveries_per_s"]),
                     "%.2f" % (r["gw_cpu"] / r["wall"]), "%.3f" % r["cpu_us_per_frame"],
                     "%.0f" % report.mib(r["peak_rss_kib"]), "%.0f" % r["p50_us"],
                     "%.0f" % r["p99_us"], "%.1f" % r.get("readyz_ms", 0.0), report.lost(r)])
    return report.table(["supplier connections", "delivered/s", "gatewayd CPU (cores)",
                         "CPU us/frame", "peak RSS MiB", "p50 us", "p99 us",
                         "/readyz ms (under load)", "lost"], rows)


CURVES = {"routes": routes_curve, "addresses": addresses_curve, "consumers": consumers_curve,
          "suppliers": suppliers_curve}


def main(argv=None):
    ap = argparse.ArgumentParser(description="gatewayd's cost curves (bench/curves)")
    ap.add_argument("--build-dir", default=os.path.join(report.ROOT, "build", "release"))
    ap.add_argument("--seconds", type=float, default=4.0, help="load time per point")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--curves", default=" ".join(CURVES), help="a subset of: " + " ".join(CURVES))
    ap.add_argument("--out", default="", help="also write the tables to this Markdown file")
    args = ap.parse_args(argv)
    want = args.curves.split()
    unknown = [k for k in want if k not in CURVES]
    if unknown:
        ap.error(f"unknown curve(s) {' '.join(unknown)}; known: {' '.join(CURVES)}")
    procs.install_handlers()
    h = Harness(os.path.abspath(args.build_dir), args.threads)
    h.probe_readyz = True
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    text = [f"bench/curves: {report.commit()}, threads {args.threads}, {args.seconds:g} s per "
            f"load point, load average at start {' '.join(load)}\n"]
    print(text[0], flush=True)
    try:
        for k in want:
            print(f"{k}:", flush=True)
            body = CURVES[k](h, args.seconds)
            print(body, flush=True)
            text.append(f"### {k}\n\n{body}")
    finally:
        shutil.rmtree(h.work, ignore_errors=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
