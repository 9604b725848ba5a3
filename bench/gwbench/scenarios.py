"""The benchmark's scenarios as data: a table of (key, title, the cases it runs, the report
body it renders). bench/run runs the rows it is asked for; the cases are plain data that
harness.Harness.run executes."""

import collections
import dataclasses

from . import report
from .harness import Case, Sender

# The lossless consumer of the throughput scenarios that measure the rate the gateway
# sustains (S1, S2, S6): at maximum rate a dropping policy would measure drops instead.
LOSSLESS = 'queue_capacity = 100000\noverflow = "backpressure"'
S5_RATE = 200000
# group-kill: each member's receiver reads at most this (issue 32: "each held to 250k frames/s"),
# and one of them is SIGKILLed this long after the senders start, in a run of at least
# GROUP_KILL_SECONDS.
MEMBER_RATE = 250000
KILL_AT = 3.0
GROUP_KILL_SECONDS = 6.0


def names(n, first=1):
    return [f"c{i}" for i in range(first, first + n)]


def own_receiver(consumers):
    return {c: [c] for c in consumers}


def one_to_one(name, size=128, rate=0, seconds=0):
    return Case(name, {"c1": ["c1"]}, {"s1.>": ["c1"]}, [Sender(["s1.data"], size, rate)],
                consumer_extra=LOSSLESS, seconds=seconds)


def fan_out(name, n=4, rate=0, **case_options):
    """Every frame to all n consumers."""
    cs = names(n)
    return Case(name, own_receiver(cs), {"fan.>": cs}, [Sender(["fan.data"], rate=rate)],
                fanout=n, **case_options)


def mixed(name, suppliers, n=4, consumer_extra=""):
    """The shape users send (issue 12): every supplier addresses frame i to consumer i mod n
    (c1, c2, ..., c1, ...), routes bench.cN -> cN, 128-byte payloads at maximum rate, with the
    default overflow policy and queue capacity unless consumer_extra says otherwise."""
    cs = names(n)
    addresses = [f"bench.{c}" for c in cs]
    return Case(name, own_receiver(cs), {a: [c] for a, c in zip(addresses, cs)},
                [Sender(addresses) for _ in range(suppliers)], consumer_extra=consumer_extra)


def addresses(n, routes=1):
    """Issue 45's shape: 1 supplier -> 1 consumer, 128 B, max rate, lossless; frame i to
    t.x.<i mod n> (n distinct addresses, gateway-peer send --spread n), over the one route t.>,
    or over `routes` routes (half exact t.x.<j>, half t.*.<j>: each address matches one)."""
    if routes == 1:
        table = {"t.>": ["c1"]}
    else:
        table = {f"t.{'*' if j % 2 else 'x'}.{j:08d}": ["c1"] for j in range(routes)}
    label = {1: "1", 1000: "1k", 1000000: "1M"}.get(n, f"{n:,}")
    name = f"A {label} address" + ("es" if n > 1 else "") + (
        f"/{ {1000: '1k'}.get(routes, routes)} routes" if routes > 1 else "")
    return Case(name, {"c1": ["c1"]}, table, [Sender(["t.x"], spread=n)],
                consumer_extra=LOSSLESS)


def tls_pairs():
    """S1, S2 and the mixed shapes (default policy) in clear and with TLS, in one run: the ratio
    is what TLS costs on this machine at this moment (report.tls); then what 10,000 idle
    supplier connections cost the gateway's memory in clear and with TLS."""
    plain = [one_to_one("S1"), fan_out("S2", consumer_extra=LOSSLESS),
             mixed("S3 4->4 mixed", 4), mixed("S3 1->4 alternating", 1)]
    return (plain + [dataclasses.replace(c, name=c.name + "-tls", tls=True) for c in plain] +
            [idle(10000), dataclasses.replace(idle(10000), name="S6-idle-tls", tls=True)])


def fan_in(name, suppliers=4):
    return Case(name, {"c1": ["c1"]}, {"in.>": ["c1"]},
                [Sender([f"in.s{i}"]) for i in range(suppliers)], consumer_extra=LOSSLESS)


def isolation(stalled):
    # drop-oldest with a byte bound: the stalled consumer's queue is what may grow. Paced so
    # that healthy consumers keep up without the stall: at the maximum rate drop-oldest drops
    # for every consumer that is slower than the supplier, which hides isolation.
    return fan_out("S5-stall" if stalled else "S5-nostall", rate=S5_RATE, min_seconds=4.0,
                   consumer_extra='queue_capacity = 1000000\nqueue_bytes = 16777216\n'
                                  'overflow = "drop-oldest"',
                   stall={"c4": 1.0} if stalled else {})


def scale(n):
    cs = names(n, first=0)
    return Case(f"S6-{n}", {"all": cs}, {"s6.>": cs}, [Sender(["s6.data"])], fanout=n,
                consumer_extra='queue_capacity = 10000\noverflow = "backpressure"')


def idle(n):
    return Case("S6-idle", {"c1": ["c1"]}, {"s6.>": ["c1"]}, [Sender(["s6.data"], rate=1000)],
                seconds=1, idle_suppliers=n)


def latency(rate, name=None):
    return one_to_one(name or f"S4-{rate // 1000}k", rate=rate)


def no_gateway(rate):
    """S4's load with the sender writing straight into the receiver: what this machine's
    loopback, scheduler and hypervisor cost two processes at this moment, measured in the same
    run; no gateway's latency can be below it."""
    return dataclasses.replace(latency(rate, f"S4-{rate // 1000}k no gateway (floor)"),
                               direct=True)


def confirmed(case, window=10000, ack=False):
    """`case` with every supplier in confirm mode (a window of `window` frames) and, with
    `ack`, every consumer `ack = true` with an acknowledging receiver."""
    senders = [dataclasses.replace(s, confirm_window=window) for s in case.senders]
    extra = case.consumer_extra + ("\nack = true" if ack else "")
    name = case.name + (" confirm+ack" if ack else " confirm")
    return dataclasses.replace(case, name=name, senders=senders, consumer_extra=extra.strip(),
                               ack=ack)


def confirm_pairs():
    """Issue 25's targets in one run: plain S1 and S3 4->4 mixed, then the same with confirms
    (window 10,000), S1 also with an `ack = true` consumer."""
    s1, s3 = one_to_one("S1"), mixed("S3 4->4 mixed", 4)
    return [s1, confirmed(s1), confirmed(s1, ack=True), s3, confirmed(s3)]


def group(name, n=4, balance="round-robin"):
    """1 supplier -> one consumer group of n members (a receiver each), max rate, lossless
    members: each frame to one member."""
    cs = names(n)
    return Case(name, own_receiver(cs), {"grp.>": ["g"]}, [Sender(["grp.data"])],
                consumer_extra=LOSSLESS, groups={"g": cs}, balance=balance)


def group_pairs():
    """Issue 32's target in one run: plain S1, then 1 supplier to a group of 4 by each
    balance; the ratio to S1 is what choosing a member costs."""
    return [one_to_one("S1"), group("group of 4 round-robin"),
            group("group of 4 least-queued", balance="least-queued"),
            group("group of 4 address", balance="address")]


def group_kill(name, balance="round-robin", n=4, suppliers=4):
    """suppliers at max rate -> one group of n `ack = true` members, lossless (backpressure),
    each member's receiver acknowledging and held to MEMBER_RATE frames/s; the last member's
    receiver SIGKILLed KILL_AT seconds in (takeover.py measures the rest)."""
    cs = names(n)
    return Case(name, own_receiver(cs), {"grp.>": ["g"]},
                [Sender(["grp.data"]) for _ in range(suppliers)],
                consumer_extra=LOSSLESS + "\nack = true", ack=True, groups={"g": cs},
                balance=balance, recv_rate=MEMBER_RATE, kill={cs[-1]: KILL_AT},
                min_seconds=GROUP_KILL_SECONDS)


def group_kill_cases():
    """Issue 32's second target: 4 suppliers -> a group of 4 members held to 250k frames/s,
    one member killed; by round-robin (the default) and by least-queued."""
    return [group_kill("4->group of 4 @250k, kill 1, round-robin"),
            group_kill("4->group of 4 @250k, kill 1, least-queued", balance="least-queued")]


MIXED_SHAPES = [mixed("S3 4->4 mixed", 4), mixed("S3 1->4 alternating", 1)]
# Distinct addresses (issue 45): one address, 256 and a million over one wildcard route, 256
# over 1,000 routes; the first is what the others are held to.
ADDRESS_SHAPES = [addresses(1), addresses(256), addresses(1000000), addresses(256, 1000)]
SWEEP_SIZES = (16, 64, 128, 256, 1024, 4096, 16384, 65536)
S6_CONSUMERS = (1, 10, 100, 1000)
# What the model comparison runs for every line of bench/model_harness/models.txt (bench/run's
# "models": the model harness per model, gatewayd as the reference).
PER_MODEL = [one_to_one("S1"), *MIXED_SHAPES, latency(100000)]

Scenario = collections.namedtuple("Scenario", "key title cases body per_model",
                                  defaults=(False,))

# cases(seconds) -> [Case]; body(results, rep) -> Markdown (results: [result] in case order,
# or for per_model rows {model name: [result]} with a None entry for a refused model).
SCENARIOS = [
    Scenario("S1", "S1: 1 supplier -> 1 consumer, 128 B payloads, max rate",
             lambda secs: [one_to_one("S1")], report.throughput_with_promotion),
    Scenario("S2", "S2: fan-out 1 -> 4, 128 B, max rate",
             lambda secs: [fan_out("S2", consumer_extra=LOSSLESS)], report.throughput_per_receiver),
    Scenario("S3", "S3: the mixed shapes: 4 suppliers -> 4 consumers and 1 -> 4, each frame "
                   "to the next consumer in turn, 128 B, max rate, default overflow policy "
                   "and queue capacity",
             lambda secs: MIXED_SHAPES, report.throughput_per_receiver),
    Scenario("addresses", "Distinct addresses: 1 supplier -> 1 consumer, 128 B, max rate, "
                          "lossless; frame i to t.x.<i mod N> over the route t.> (N = 1, 256, "
                          "1,000,000), and 256 addresses over 1,000 routes",
             lambda secs: ADDRESS_SHAPES, report.addresses),
    Scenario("S4", "S4: latency at fixed rates, 1 -> 1, 128 B",
             lambda secs: [latency(20000), latency(100000), no_gateway(100000)],
             report.latency),
    Scenario("S5", f"S5: isolation: S2 (paced at {S5_RATE // 1000}k frames/s) with consumer 4 "
                   "stalled after 1 s",
             lambda secs: [isolation(False), isolation(True)], report.isolation),
    Scenario("S6", "S6: scale",
             lambda secs: [scale(n) for n in S6_CONSUMERS] + [idle(10000)], report.scale),
    Scenario("sweep", "S1 payload sweep (16 B .. 64 KiB, 3 s each)",
             lambda secs: [one_to_one(f"S1-{s}B", size=s, seconds=min(secs, 3.0))
                           for s in SWEEP_SIZES],
             report.sweep),
    Scenario("models", "Concurrency models: S1, the mixed shapes (S3) and S4 (100k frames/s) "
                       "per model",
             lambda secs: PER_MODEL, report.models, per_model=True),
    Scenario("confirm", "Confirms: S1 and S3 4->4 mixed plain, then with confirm-mode suppliers "
                        "(window 10,000 frames), S1 also with an ack = true consumer",
             lambda secs: confirm_pairs(), report.confirm),
    Scenario("groups", "Consumer groups: S1, then 1 supplier -> a group of 4 members "
                       "(round-robin, least-queued, address), 128 B, max rate, lossless members",
             lambda secs: group_pairs(), report.groups),
    Scenario("group-kill", f"Consumer group takeover: 4 suppliers (max rate) -> a group of 4 "
                           f"ack = true members, each reading at most {MEMBER_RATE // 1000}k "
                           f"frames/s, lossless; one member's receiver SIGKILLed {KILL_AT:g} s "
                           f"in; round-robin and least-queued",
             lambda secs: group_kill_cases(), report.group_kill),
    Scenario("tls", "TLS: S1, S2 and the mixed shapes (S3, default policy) in clear, then with "
                    "mutual TLS on the run's --tls-legs (supplier, or both legs), P-256 "
                    "certificates",
             lambda secs: tls_pairs(), report.tls),
]
KEYS = [s.key for s in SCENARIOS]

# bench/models: the fuller comparison, every model, several rounds. F is not one of bench/run's
# scenarios: fan-in is where several threads want the same consumer at once, the case the
# strands article measured.
COMPARISON = [one_to_one("S1 1->1 max"), mixed("S3 4->4 mixed", 4),
              mixed("S3 1->4 alternating", 1), latency(20000, "S4 1->1 @20k/s"),
              latency(100000, "S4 1->1 @100k/s"), fan_in("F 4->1 max")]
