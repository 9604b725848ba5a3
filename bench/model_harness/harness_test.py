#!/usr/bin/env python3
"""model_harness_test (ctest, label bench): each model and drain of the model harness carries a
burst of frames, 2 suppliers -> 2 consumers with each supplier alternating over both, at full
rate, through backpressure queues small enough that the suppliers are paused and resumed all
along; every frame must arrive once, in order, intact, nothing dropped, and the harness must
stop on SIGTERM with exit 0. Waits on conditions (the ports file, the consumers connected, the
receivers counting every expected frame), each with a bound; ends only what it started, by PID.

Usage: harness_test.py --build-dir DIR [--frames N]"""

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gwbench import probes, procs  # noqa: E402
from gwbench.harness import Harness  # noqa: E402
from gwbench.models import Model  # noqa: E402

MODELS = ("leader-followers", "half-sync-half-async", "asio-threads")
DRAINS = ("strand", "mutex")
CONSUMERS = ("c1", "c2")
# Capacity 64: the gateway's high-water mark is 32 frames, far below one read's worth.
POLICY = 'queue_capacity = 64\noverflow = "backpressure"'
DEADLINE_S = 30  # per receiver: only a broken model comes near it


def start_receiver(h, name, expect):
    out, err = h.path(f"{name}.json"), h.path(f"{name}.err")
    p = procs.start([h.peer, "recv", "--listen", "127.0.0.1:0", "--json", "--expect", str(expect),
                     "--duration", str(DEADLINE_S)], out, err)
    port = probes.listening_port(err, 10)
    if port is None:
        raise RuntimeError(f"gateway-peer recv did not start: see {err}")
    return p, out, port


def run_model(h, model, drain, frames):
    """Problems found (empty: the model works)."""
    name = f"{model}/{drain}"
    receivers = {c: start_receiver(h, f"{model}-{drain}-{c}", frames) for c in CONSUMERS}
    cfg = h.write_config((), {f"t.{c}": [c] for c in CONSUMERS},
                         {c: f"127.0.0.1:{r[2]}" for c, r in receivers.items()}, POLICY, 0)
    gw, sport, mport = h.start_gateway(name, cfg, list(CONSUMERS),
                                       Model(name, ("--model", model, "--drain", drain)))
    senders = []
    for s in range(2):
        out = h.path(f"{model}-{drain}-send{s}.json")
        senders.append(procs.start([h.peer, "send", "--to", f"127.0.0.1:{sport}", "--address",
                                    ",".join(f"t.{c}" for c in CONSUMERS), "--count",
                                    str(frames), "--json"], out, out + ".err"))
    problems = []
    for p in senders:
        procs.reap(p, DEADLINE_S)
        if p.returncode != 0:
            problems.append(f"gateway-peer send exited {p.returncode}")
    for c, (p, out, _) in receivers.items():
        procs.reap(p, DEADLINE_S + 10)  # exits by itself at --expect or at --duration
        with open(out) as f:
            r = json.loads(f.read() or "{}")
        want = {"frames": frames, "lost": 0, "reordered": 0, "duplicated": 0, "late": 0,
                "corrupt": 0}
        got = {k: r.get(k) for k in want}
        if p.returncode != 0 or got != want:
            problems.append(f"{c}: exit {p.returncode}, {got} (expected {frames} frames)")
    pauses = 0
    try:
        text = probes.scrape(mport)
        drops = probes.metric_sum(text, "gatewayd_consumer_dropped_messages_total")
        pauses = probes.metric_sum(text, "gatewayd_supplier_backpressure_pauses_total")
        if drops:
            problems.append(f"{drops:.0f} frames dropped")
        if not pauses:
            problems.append("no supplier was ever paused: the case did not test backpressure")
    except OSError as e:
        problems.append(f"no /metrics: {e}")
    procs.end(gw)
    if gw.returncode != 0:
        problems.append(f"model-harness exited {gw.returncode}")
    print(f"{name:32} {'ok' if not problems else 'FAILED'}: {2 * frames} frames, "
          f"{pauses:.0f} pauses", flush=True)
    return [f"{name}: {p}" for p in problems]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--frames", type=int, default=500000, help="per supplier (even)")
    args = ap.parse_args()
    procs.install_handlers()
    h = Harness(os.path.abspath(args.build_dir), threads=2)
    problems = []
    try:
        for model in MODELS:
            for drain in DRAINS:
                problems += run_model(h, model, drain, args.frames)
    finally:
        procs.end_all()
        shutil.rmtree(h.work, ignore_errors=True)
    for p in problems:
        print("FAILED:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
