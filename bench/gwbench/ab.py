"""bench/compare's driver: the same cases against two builds of gatewayd, alternating the two
binaries case by case and round by round in one sitting, then the medians side by side with
their ratio. One peer tool (the second build's) drives both, so only the daemon differs."""

import argparse
import os
import shutil
import sys

from . import procs, report, scenarios
from .harness import Harness

# (figure, label, True when higher is better)
# "user": gatewayd's own code (user time), without the kernel's TCP work, which is most of
# "CPU" at full rate and swings with the machine: the steadier figure for a change to the code.
FIGURES = [("deliveries_per_s", "deliveries/s", True), ("cpu_us_per_frame", "CPU us/frame", False),
           ("user_us_per_frame", "user CPU us/frame", False),
           ("p50_us", "p50 us", False), ("p99_us", "p99 us", False)]
# S4 is paced: its rate is the pacing, its latency and CPU are the figures.
PACED = {"deliveries_per_s"}
THRESHOLD = 0.05


def cases(keys):
    table = {
        "S1": [scenarios.one_to_one("S1")],
        "S2": [scenarios.fan_out("S2", consumer_extra=scenarios.LOSSLESS)],
        "S3": scenarios.MIXED_SHAPES,
        "S4": [scenarios.latency(100000)],
        "A": scenarios.ADDRESS_SHAPES,
    }
    out = []
    for k in keys:
        if k not in table:
            raise ValueError(f"unknown scenario {k}; known: {' '.join(table)}")
        out.extend(table[k])
    return out


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def verdict(base, head, higher_better):
    if base == 0:
        return ""
    ratio = head / base
    worse = ratio < 1 - THRESHOLD if higher_better else ratio > 1 + THRESHOLD
    return "slower" if worse else ""


def figures_for(case):
    paced = case.name.startswith("S4")
    for key, label, higher in FIGURES:
        if paced and key in PACED:
            continue
        if not paced and key in ("p50_us", "p99_us"):
            continue
        yield key, label, higher


def table(results, names, labels):
    """Markdown: one row per (case, figure), medians over the rounds, ratio head/base."""
    rows = ["| case | figure | %s | %s | ratio | |" % labels, "|---|---|---|---|---|---|"]
    slower = 0
    for case in names:
        a, b = results[case.name]
        for key, label, higher in figures_for(case):
            ma, mb = median([r[key] for r in a]), median([r[key] for r in b])
            v = verdict(ma, mb, higher)
            slower += v == "slower"
            fmt = "%.2fM" if key == "deliveries_per_s" else "%.3f" if "per_frame" in key else "%.0f"
            scale = 1e6 if key == "deliveries_per_s" else 1
            rows.append("| %s | %s | %s | %s | %.3f | %s |" % (
                case.name, label, fmt % (ma / scale), fmt % (mb / scale),
                mb / ma if ma else float("nan"), v))
        lost = [sum(r["lost"] for r in a), sum(r["lost"] for r in b)]
        rows.append("| %s | lost (all rounds) | %d | %d | | %s |" % (
            case.name, lost[0], lost[1], "LOST" if lost[1] else ""))
    return "\n".join(rows), slower


def main(argv=None):
    ap = argparse.ArgumentParser(description="gatewayd A/B: two builds, alternating, one sitting")
    ap.add_argument("--base", required=True, help="build folder of the base commit")
    ap.add_argument("--head", required=True, help="build folder of the head commit")
    ap.add_argument("--labels", default="base,head")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--threads", type=int, default=2,
                    help="gateway threads (2: the shape the issues measure)")
    ap.add_argument("--scenarios", default="S1 S2 S3 S4 A")
    ap.add_argument("--out", default="", help="also write the table to this Markdown file")
    args = ap.parse_args(argv)
    try:
        todo = cases(args.scenarios.split())
    except ValueError as e:
        ap.error(str(e))
    labels = tuple(args.labels.split(","))
    procs.install_handlers()
    sides = [Harness(os.path.abspath(d), args.threads) for d in (args.base, args.head)]
    sides[0].peer = sides[1].peer  # one load generator for both: only the daemon differs
    results = {c.name: ([], []) for c in todo}
    print(f"compare: {labels[0]} {sides[0].gatewayd}\n         {labels[1]} {sides[1].gatewayd}\n"
          f"         {args.rounds} rounds, {args.seconds:g} s per case, threads {args.threads}",
          flush=True)
    try:
        for rnd in range(args.rounds):
            for case in todo:
                # Alternate which binary goes first, so neither always runs on a warmer machine.
                order = (0, 1) if rnd % 2 == 0 else (1, 0)
                for side in order:
                    r = sides[side].run(case, args.seconds)
                    results[case.name][side].append(r)
                    print("  round %d %-5s %-22s %s" % (rnd + 1, labels[side], case.name,
                                                       report.one_line(r)), flush=True)
    finally:
        for h in sides:
            shutil.rmtree(h.work, ignore_errors=True)
    text, slower = table(results, todo, labels)
    print()
    print(text)
    print(f"\n{slower} figure(s) slower past {THRESHOLD:.0%}" if slower
          else f"\nno figure slower past {THRESHOLD:.0%}")
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# {labels[0]} vs {labels[1]}: {args.rounds} rounds, {args.seconds:g} s per "
                    f"case, threads {args.threads}, alternating\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
