"""bench/models: the patterns' claims, reproduced. Every line of bench/model_harness/models.txt
(each concurrency model of the model harness with the strand or the mutex consumer drain, and
the real gatewayd as the reference) through S1, the mixed shapes of S3, S4 at two rates and a
4 -> 1 fan-in, several rounds interleaved; medians of throughput, lost frames, latency, the
gateway process's CPU and context switches per frame and, for the drain models, the share of
its thread time spent blocked. Writes bench/results/<out>.md and .json."""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from . import models, procs, report, scenarios
from .harness import Harness

FIGURES = ("deliveries_per_s", "lost", "lost_share", "p50_us", "p99_us", "ctx_per_msg",
           "vol_per_frame", "nonvol_per_frame", "cpu_us_per_frame", "blocked_share",
           "lock_share")


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def summarize(rows):
    """One row per (case, model): the median of each figure over the rounds, totals of counts."""
    groups = {}
    for r in rows:
        groups.setdefault((r["scenario"], r["model"]), []).append(r)
    out = []
    for (scenario, model), rs in groups.items():
        m = {"scenario": scenario, "model": model, "runs": len(rs),
             "delivered": sum(r["delivered"] for r in rs),
             "expected": sum(r["expected"] for r in rs), "drops": {}}
        for r in rs:
            for k, v in r["drops"].items():
                m["drops"][k] = m["drops"].get(k, 0) + v
        m.update({k: median([r[k] for r in rs]) for k in FIGURES})
        out.append(m)
    return out


def build(build_dir):
    subprocess.run(["cmake", "-S", report.ROOT, "-B", build_dir, "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build_dir, "-j", os.environ.get("GATEWAYD_JOBS", "2"),
                    "--target", "gatewayd", "model-harness", "gateway-peer"], check=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-build", action="store_true", help="use the build directory as it is")
    ap.add_argument("--build-dir", default=os.path.join(report.ROOT, "build", "release"))
    ap.add_argument("--duration", type=float, default=5.0, help="seconds of sending per run")
    ap.add_argument("--threads", type=int, default=2,
                    help="threads of gatewayd and of the model harness")
    ap.add_argument("--only", help="run only the cases whose name contains this")
    ap.add_argument("--models", default="",
                    help="names from bench/model_harness/models.txt (default: all)")
    ap.add_argument("--out", default="models",
                    help="file name in bench/results/, or a path (no suffix)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds over every configuration; the table shows medians")
    args = ap.parse_args(argv)
    try:
        model_list = models.load(only=args.models.split() or None)
    except ValueError as e:
        ap.error(str(e))
    build_dir = os.path.abspath(args.build_dir)
    if not args.no_build:
        build(build_dir)
    procs.install_handlers()
    out = os.path.join(report.ROOT, "bench", "results", args.out)
    if os.path.dirname(args.out):
        out = os.path.abspath(args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    h = Harness(build_dir, args.threads)
    cases = [c for c in scenarios.COMPARISON if not args.only or args.only in c.name]
    rows, load_before = [], os.getloadavg()[0]
    for case in cases:
        for _ in range(args.repeat):
            for m in model_list:
                r = h.run(case, args.duration, m)
                r.update(model=m.name, scenario=case.name, receivers=None)
                r["vol_per_frame"] = r["ctx_vol"] / max(r["delivered"], 1)
                r["nonvol_per_frame"] = r["ctx_nonvol"] / max(r["delivered"], 1)
                rows.append(r)
                print(f"{case.name:22} {m.name:28} {report.one_line(r)}", flush=True)
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    header = (f"# Concurrency models: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n"
              f"Machine: {os.cpu_count()} CPUs ({cpu}), load average {load_before:.1f} before "
              f"the run and {os.getloadavg()[0]:.1f} after; threads = {args.threads} (gatewayd "
              f"and model-harness); "
              f"payload 128 B; {args.duration:g} s of sending per run; medians of {args.repeat} "
              f"runs per row (rounds interleaved); gateway-peer send/recv on the same cores. "
              f"The S3 cases use the default overflow policy and queue capacity (lost and drops "
              f"are the measure there); the others are lossless (backpressure). `gatewayd` is the "
              f"product (bench/run measures it); the other rows are bench/model_harness.\n"
              f"Command: bench/models {' '.join(argv if argv is not None else sys.argv[1:])}\n\n")
    table = report.comparison(summarize(rows))
    with open(out + ".md", "w") as f:
        f.write(header + table)
    with open(out + ".json", "w") as f:
        json.dump(rows, f, indent=1)
    print("\n" + table)
    print(f"written to {out}.md")
    shutil.rmtree(h.work, ignore_errors=True)
    return 0
