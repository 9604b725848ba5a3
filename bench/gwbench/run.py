"""bench/run's driver: runs the scenarios it is asked for (scenarios.SCENARIOS) against the
real gatewayd, the model comparison ("models") against every line of
bench/model_harness/models.txt (the model harness, and gatewayd as the reference), and writes
the sitting's one report, bench/results/<date>-<commit>.md."""

import argparse
import dataclasses
import datetime
import os
import shutil
import sys
import time

from . import models, procs, report, scenarios
from .harness import Harness


def run_case(h, case, seconds, model=models.GATEWAYD, prefix=""):
    if prefix:
        case = dataclasses.replace(case, name=prefix + case.name)
    r = h.run(case, seconds, model)
    print("  %-32s %s" % (r["name"], report.one_line(r)), flush=True)
    if "takeover" in r:
        print("  %-32s %s" % ("", report.takeover_line(r)), flush=True)
    return r


def run_scenario(h, sc, model_list, seconds, rep):
    """The scenario's report body: its cases on gatewayd, or on every model of the list (a
    model that does not start is reported as skipped, with the reason)."""
    cases = sc.cases(seconds)
    if not sc.per_model:
        return sc.body([run_case(h, c, seconds) for c in cases], rep)
    by_model = {}
    for m in model_list:
        try:
            by_model[m.name] = [run_case(h, c, seconds, m, f"M-{m.name}-") for c in cases]
        except RuntimeError as e:
            print(f"  {m.name}: skipped: {e}", flush=True)
            by_model[m.name] = str(e)
    return sc.body(by_model, rep)


def main(argv=None):
    ap = argparse.ArgumentParser(description="gatewayd's end-to-end benchmark (bench/run)")
    ap.add_argument("--build-dir", default=os.path.join(report.ROOT, "build", "release"))
    ap.add_argument("--seconds", type=float, default=5.0, help="load time per case")
    ap.add_argument("--threads", type=int, default=0, help="gateway threads (0 = one per core)")
    ap.add_argument("--scenarios", default=" ".join(scenarios.KEYS),
                    help="a subset of: " + " ".join(scenarios.KEYS))
    ap.add_argument("--models", default="",
                    help="the models scenario's lines of bench/model_harness/models.txt "
                         "(default: all)")
    ap.add_argument("--no-build", action="store_true", help="(bench/run builds, not this)")
    ap.add_argument("--out", default=os.path.join(report.ROOT, "bench", "results"))
    ap.add_argument("--tls-legs", choices=("supplier", "both"), default="both",
                    help="the tls scenario's TLS legs: the supplier leg only, or both legs "
                         "(default)")
    args = ap.parse_args(argv)
    want = args.scenarios.split()
    unknown = [k for k in want if k not in scenarios.KEYS]
    if unknown:
        ap.error(f"unknown scenario(s) {' '.join(unknown)}; known: {' '.join(scenarios.KEYS)}")
    try:
        model_list = models.load(only=args.models.split() or None)
    except ValueError as e:
        ap.error(str(e))
    procs.install_handlers()
    os.makedirs(args.out, exist_ok=True)
    h = Harness(os.path.abspath(args.build_dir), args.threads, args.tls_legs)
    rep = report.Report(args.out, datetime.date.today().isoformat())
    t_start = time.time()
    print(f"bench: gatewayd {h.gatewayd}, {args.seconds:g} s per case", flush=True)
    for sc in scenarios.SCENARIOS:
        if sc.key in want:
            rep.write(sc.key, sc.title, run_scenario(h, sc, model_list, args.seconds, rep))
    path = rep.summary(time.time() - t_start)
    print(f"wrote {os.path.relpath(path, report.ROOT)} ({time.time() - t_start:.0f} s)")
    shutil.rmtree(h.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
