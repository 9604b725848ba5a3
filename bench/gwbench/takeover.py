"""A group member killed mid-run (harness.Case.kill): what the survivors took over and how fast,
from gatewayd's per-member counters sampled every 100 ms, and what was lost or duplicated, from
the frames' identities every receiver logged (gateway-peer recv --seen-log), the killed one's
up to its death."""

import struct
import time

from . import probes

# What send_killing() samples, per group member (label `member`).
SAMPLED = {"sent": "gatewayd_consumer_messages_sent_total",
           "given": "gatewayd_consumer_handover_frames_total/given",
           "taken": "gatewayd_consumer_handover_frames_total/taken",
           "unacked": "gatewayd_consumer_unacked_frames",
           "queued": "gatewayd_consumer_queue_depth",
           "congested": "gatewayd_consumer_congested",
           "connected": "gatewayd_consumer_connected"}
STEADY_FROM = 1.0  # seconds after the senders started: start-up (dials, first batches) is over
SETTLE_AFTER_KILL = 1.0  # the "after" rate is taken from here on after the kill
SHARE = 0.9  # the survivors' rate counts as recovered at this share of their cap


def member_counters(text):
    """{key of SAMPLED: {member: value}} from one /metrics scrape (group members only)."""
    out = {k: {} for k in SAMPLED}
    for key, spec in SAMPLED.items():
        name, _, direction = spec.partition("/")
        for labels, v in probes.samples(text, name):
            if labels.get("member") and (not direction or labels.get("direction") == direction):
                out[key][labels["member"]] = v
    return out


def wait_acknowledged(mport, timeout=5.0):
    """Waits (at most `timeout`) until the connected members hold nothing unacknowledged: the
    receivers then have logged all that was written to them, and what a dead member still holds
    stays counted as lost."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = member_counters(probes.scrape(mport))
        if not any(v for k, v in m["unacked"].items() if m["connected"].get(k)):
            return
        time.sleep(0.1)


def _total(sample, key, members):
    return sum(sample[1][key].get(m, 0.0) for m in members)


def rate(samples, members, t_from, t_to):
    """Frames/s the members were written between the first sample at or after t_from and the
    last at or before t_to (None if that leaves less than two samples)."""
    window = [s for s in samples if t_from <= s[0] <= t_to]
    if len(window) < 2 or window[-1][0] <= window[0][0]:
        return None
    a, b = window[0], window[-1]
    return (_total(b, "sent", members) - _total(a, "sent", members)) / (b[0] - a[0])


def seen(paths):
    """Reads every receiver's --seen-log: (records, distinct frames, records per receiver).
    A frame is (sender, stream, sequence); a bitmap per (sender, stream) finds the repeats,
    across receivers as well as within one."""
    bitmaps, records, per_receiver = {}, 0, {}
    for g, path in paths.items():
        with open(path, "rb") as f:
            data = f.read()
        n = len(data) // 12
        per_receiver[g] = n
        records += n
        for sender, stream, seq in struct.iter_unpack("<HBxQ", data[:n * 12]):
            bm = bitmaps.get((sender, stream))
            if bm is None:
                bm = bitmaps[(sender, stream)] = bytearray()
            i = seq >> 3
            if i >= len(bm):
                bm.extend(bytes(max(i + 1 - len(bm), 1 << 16)))
            bm[i] |= 1 << (seq & 7)
    distinct = sum(int.from_bytes(bm, "little").bit_count() for bm in bitmaps.values())
    return records, distinct, per_receiver


def figures(case, timeline, seen_paths, receivers, sent, received, silent_senders=0):
    """The kill case's figures (the result's "takeover" entry) and its lost/dup, which replace
    the totals-based ones measure() made (the killed receiver left no summary). `sent`: what
    the senders' summaries say; `received`: gatewayd_supplier_messages_received_total. Lost
    counts from the larger: a sender still blocked (a group that stopped reading its suppliers)
    is ended after its time and leaves no summary, and its frames the gateway took count."""
    samples, killed = timeline["samples"], timeline["killed"]
    member = {g: f"127.0.0.1:{port}" for g, (_, _, port, _) in receivers.items()}
    dead = [member[g] for g in killed]
    alive = [m for m in member.values() if m not in dead]
    t_kill = min(killed.values()) if killed else None
    cap_before = case.recv_rate * len(member)
    cap_after = case.recv_rate * len(alive)
    out = {"killed": {g: round(t, 3) for g, t in killed.items()}, "cap_before": cap_before,
           "cap_after": cap_after, "samples": len(samples)}
    out["before_per_s"] = rate(samples, list(member.values()), STEADY_FROM, t_kill)
    t_end = samples[-1][0] if samples else 0.0
    out["after_per_s"] = rate(samples, alive, t_kill + SETTLE_AFTER_KILL, t_end)
    # The killed member's share: what it held when it died (its queue and, with ack = true, what
    # it had not acknowledged) and what was routed to it before the group saw it down. Members
    # of a saturated group also hand over to one another while they live (a member behind by
    # slow_consumer_ms hands its queue on), so the counts are taken from the kill on, and the
    # dead member's own gauges say when it held nothing more.
    before_kill = [x for x in samples if x[0] < t_kill]
    after = [x for x in samples if x[0] >= t_kill]
    prev = before_kill[-1] if before_kill else None
    base_given = _total(prev, "given", dead) if prev else 0.0
    given = max((_total(x, "given", dead) for x in after), default=base_given) - base_given
    out["given"] = int(given)
    last = samples[-1] if samples else None
    out["stranded"] = int(_total(last, "queued", dead) + _total(last, "unacked", dead)) \
        if last else 0
    t_handed = t_written = t_rate = None
    dip, handed_base = None, 0.0
    for x in after:
        if prev is not None and x[0] > prev[0]:
            r = (_total(x, "sent", alive) - _total(prev, "sent", alive)) / (x[0] - prev[0])
            if x[0] <= t_kill + SETTLE_AFTER_KILL:
                dip = r if dip is None else min(dip, r)
            if t_rate is None and r >= SHARE * cap_after:
                t_rate = x[0]
        held = _total(x, "queued", dead) + _total(x, "unacked", dead)
        if held and t_handed is not None:  # frames came to it again: not handed over yet
            t_handed = t_written = None
        if t_handed is None and held == 0:
            t_handed, handed_base = x[0], _total(prev, "sent", alive) if prev else 0.0
        if t_handed is not None and t_written is None and \
                _total(x, "sent", alive) - handed_base >= given:
            t_written = x[0]
        prev = x
    # Every sample in which the survivors were all congested (none live): then the group routes
    # to every member in turn, the dead one included.
    out["none_live_samples"] = sum(
        1 for x in after if all(x[1]["congested"].get(m, 0) for m in alive))
    out["samples_after"] = len(after)
    out["handed_s"] = t_handed - t_kill if t_handed is not None else None
    out["written_s"] = t_written - t_kill if t_written is not None else None
    out["rate_back_s"] = t_rate - t_kill if t_rate is not None else None
    out["dip_per_s"] = dip
    parts = [out["rate_back_s"], out["written_s"]]  # None: not within the run
    out["takeover_s"] = None if None in parts else max(parts)
    records, distinct, per_receiver = seen(seen_paths)
    out["seen_records"] = records
    out["seen_by_receiver"] = per_receiver
    out["senders_reported"] = sent
    out["silent_senders"] = silent_senders
    out["gateway_received"] = received
    basis = max(sent, received)
    lost = max(0, basis - distinct)
    return {"takeover": out, "delivered_distinct": distinct, "lost": lost, "sent": basis,
            "lost_share": lost / basis if basis else 0.0, "dup": records - distinct,
            "extra_frames": max(0, distinct - basis)}
