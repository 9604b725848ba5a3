"""The benchmark's Markdown tables and gnuplot plots: one body per scenario (scenarios.py names
which), the per-run files in bench/results/ and the summary with the machine."""

import os
import platform
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def fmt(v):
    return "n/a" if v is None else "%.1f" % v


def mib(kib):
    return kib / 1024.0


def millions(v):
    return "%.2fM" % (v / 1e6)


def cpu_split(r):
    """gatewayd / load tools / everything else on the machine, in cores (of os.cpu_count())."""
    others = max(0.0, r["machine_busy"] - r["gw_cpu"] - r["tools_cpu"])
    return "%.2f / %.2f / %.2f" % (r["gw_cpu"] / r["wall"], r["tools_cpu"] / r["wall"],
                                   others / r["wall"])


def lost(r):
    """Frames sent and never delivered (deliveries expected minus made), with their share."""
    return "%d (%.1f%%)" % (r["lost"], 100 * r["lost_share"])


def drops(r):
    """gatewayd's own count of what it dropped, by reason."""
    return ", ".join(f"{k} {v}" for k, v in sorted(r["drops"].items())) or "0"


THROUGHPUT_HEAD = ["case", "sent/s", "delivered/s", "lost", "drops by reason (gatewayd)", "MB/s",
                   "p50 us", "p99 us", "CPU gatewayd / tools / others (cores)", "ctx sw/msg",
                   "corrupt"]


def throughput_row(r, label=None):
    return [label or r["name"], millions(r["sent_per_s"]), millions(r["deliveries_per_s"]),
            lost(r), drops(r), "%.0f" % r["mb_per_s"], "%.0f" % r["p50_us"],
            "%.0f" % r["p99_us"], cpu_split(r), "%.4f" % r["ctx_per_msg"], "%d" % r["corrupt"]]


def per_receiver(r):
    rows = [[g, millions(x.get("frames_per_s", 0)), "%.0f" % (x["latency_ns"]["p99"] / 1e3),
             x.get("lost", 0), x.get("streams", 0)] for g, x in sorted(r["receivers"].items())]
    return "\n" + table(["consumer", "frames/s", "p99 us", "gaps (sequence)", "streams"], rows)


# --------------------------------------------------------------------------- scenario bodies


def throughput_with_promotion(results, rep):
    r = results[0]
    return (table(THROUGHPUT_HEAD, [throughput_row(r)]) +
            "\nL/F promotion latency p99: %s us over %d promotions.\n" % (
                fmt(r["promotion_p99_us"]), r["promotions"]))


def throughput_per_receiver(results, rep):
    body = table(THROUGHPUT_HEAD, [throughput_row(r) for r in results])
    for r in results:
        body += f"\n{r['name']}, per consumer:\n" + per_receiver(r)
    return body


def addresses(results, rep):
    """Each distinct-address case beside the one-address case of the same run: its rate and
    CPU per frame as a share of that one's."""
    one = results[0]
    rows = []
    for r in results:
        rate = r["deliveries_per_s"] / one["deliveries_per_s"] if one["deliveries_per_s"] else 0
        cpu = r["cpu_us_per_frame"] / one["cpu_us_per_frame"] if one["cpu_us_per_frame"] else 0
        rows.append([r["name"], millions(r["deliveries_per_s"]), "%.2fx" % rate,
                     "%.3f" % r["cpu_us_per_frame"], "%.2fx" % cpu,
                     "%.3f" % r["user_us_per_frame"], lost(r), drops(r), cpu_split(r)])
    return table(["case", "delivered/s", "of 1 address", "gatewayd CPU us/frame",
                  "of 1 address", "user CPU us/frame", "lost", "drops by reason (gatewayd)",
                  "CPU gatewayd / tools / others (cores)"], rows)


def latency(results, rep):
    rows = [[r["name"], "%.0f" % r["p50_us"], "%.0f" % r["p99_us"], "%.0f" % r["p999_us"],
             "%.0f" % r["max_us"], fmt(r["promotion_p99_us"]), cpu_split(r),
             "%.3f" % r["ctx_per_msg"], lost(r)] for r in results]
    return table(["case", "p50 us", "p99 us", "p99.9 us", "max us", "promotion p99 us",
                  "CPU gatewayd / tools / others", "ctx sw/msg", "lost"], rows)


def confirm(results, rep):
    """Each confirm case beside the plain case it is made from (its name without the suffix),
    from the same run, with what the senders saw settle."""
    by_name = {r["name"]: r for r in results}
    rows = []
    for r in results:
        plain = by_name.get(r["name"].replace(" confirm+ack", "").replace(" confirm", ""))
        ratio = (r["deliveries_per_s"] / plain["deliveries_per_s"]
                 if plain and plain is not r and plain["deliveries_per_s"] else None)
        rows.append([r["name"], millions(r["deliveries_per_s"]), lost(r), r.get("dup", 0),
                     "%d / %d / %d" % (r.get("confirmed", 0), r.get("rejected", 0),
                                       r.get("unconfirmed", 0)),
                     drops(r), "%.3f" % r["cpu_us_per_frame"], cpu_split(r), "%.0f" % r["p99_us"],
                     "%.2fx" % ratio if ratio is not None else ""])
    return table(["case", "delivered/s", "lost", "duplicated", "confirmed / rejected / unconfirmed",
                  "drops by reason (gatewayd)", "gatewayd CPU us/frame",
                  "CPU gatewayd / tools / others (cores)", "p99 us", "of plain"], rows)


def groups(results, rep):
    """Each group case beside plain S1 from the same run, with each member's share."""
    s1 = next((r for r in results if r["name"] == "S1"), None)
    rows = []
    for r in results:
        ratio = (r["deliveries_per_s"] / s1["deliveries_per_s"]
                 if s1 and r is not s1 and s1["deliveries_per_s"] else None)
        shares = " / ".join("%.0f%%" % (100.0 * v.get("frames", 0) / r["delivered"])
                            for v in r["receivers"].values()) if r["delivered"] else ""
        rows.append([r["name"], millions(r["deliveries_per_s"]), lost(r), drops(r),
                     "%.3f" % r["cpu_us_per_frame"], cpu_split(r),
                     shares if r is not s1 else "", "%.2fx" % ratio if ratio is not None else ""])
    return table(["case", "delivered/s", "lost", "drops by reason (gatewayd)",
                  "gatewayd CPU us/frame", "CPU gatewayd / tools / others (cores)",
                  "members' shares", "of S1"], rows)


def group_kill(results, rep):
    """The takeover cases (takeover.py): the group's rate before the kill and the survivors'
    after it, against what the members' caps allow; how fast the survivors took the killed
    member's share; lost and duplicated frames from the receivers' frame logs."""
    def sec(v):
        return "n/a" if v is None else "%.1f s" % v

    def rate_of(v, cap):
        return "n/a" if v is None else "%s (%.2fx of %s)" % (millions(v), v / cap, millions(cap))

    def verdict(r):
        """Issue 32's three asks, each one that fails named."""
        t, misses = r["takeover"], []
        if t["before_per_s"] is None or t["before_per_s"] < 0.9 * t["cap_before"]:
            misses.append("rate")
        if t["takeover_s"] is None or t["takeover_s"] >= 1.0:
            misses.append("takeover")
        if r["lost"]:
            misses.append("lost")
        if t["silent_senders"]:
            misses.append("%d suppliers kept paused" % t["silent_senders"])
        return "no: " + ", ".join(misses) if misses else "yes"

    rows = []
    for r in results:
        t = r["takeover"]
        rows.append([r["name"], verdict(r), rate_of(t["before_per_s"], t["cap_before"]),
                     rate_of(t["after_per_s"], t["cap_after"]),
                     "n/a" if t["dip_per_s"] is None else millions(t["dip_per_s"]),
                     "%d" % t["given"], sec(t["handed_s"]), sec(t["written_s"]),
                     sec(t["takeover_s"]), "%d" % t["stranded"],
                     "%d of %d" % (t["none_live_samples"], t["samples_after"]),
                     "%d of %s" % (r["lost"], millions(r["sent"])), "%d" % r["dup"], drops(r)])
    return (table(["case", "meets issue 32", "delivered/s before (4 members)", "after (3 survivors)",
                   "survivors' lowest 100 ms in the first 1 s", "frames handed over",
                   "handed over by", "written by", "share taken within",
                   "still held by the dead member", "samples with no survivor live",
                   "lost (ack = true)", "duplicates",
                   "drops by reason (gatewayd)"], rows) +
            "\nRates are gatewayd_consumer_messages_sent_total of the members, sampled every "
            "100 ms: before = all members from 1 s after the start to the kill, after = the "
            "survivors from 1 s after the kill to the end of the load. Handed over = the growth "
            "of the killed member's gatewayd_consumer_handover_frames_total{direction=\"given\"} "
            "from the kill on (its queue and what it had not acknowledged); handed over by = time "
            "from the SIGKILL until its queue_depth + unacked_frames read 0 for good; written by = "
            "until the survivors had written at least as many frames since (taken frames go "
            "first); share taken within = the later of written by and the survivors' 100 ms "
            "rate first reaching 90 % of their cap (n/a: not within the run); still held = "
            "the dead member's queue_depth + unacked_frames at the end of the load; no survivor "
            "live = samples after the kill in which every survivor was congested "
            "(gatewayd_consumer_congested 1: the group then treats no member as live). "
            "Lost = frames sent (the senders' count, or the gateway's received count if larger: "
            "a sender the group kept paused past its time is ended and leaves no count) minus "
            "distinct frames in the receivers' --seen-log "
            "files (a frame counts once its ack is written; the killed receiver's log up to "
            "its death included); duplicates = logged frames minus distinct ones (redelivered "
            "frames the killed member had taken but whose ack had not reached the gateway). "
            "Times have the sampling's resolution (about 0.1 s). Meets issue 32: before >= 0.9x "
            "of the cap, share taken within < 1 s, 0 lost.\n")


def tls(results, rep):
    """S1, S2 and the mixed shapes with TLS next to the same cases in clear, from the same run;
    then the idle connections' memory, in clear and with TLS."""
    idle = [r for r in results if r["name"].startswith("S6-idle")]
    results = [r for r in results if r not in idle]
    by_name = {r["name"]: r for r in results}
    rows = []
    for plain in results:
        secure = by_name.get(plain["name"] + "-tls")
        if not secure:
            continue
        ratio = (secure["deliveries_per_s"] / plain["deliveries_per_s"]
                 if plain["deliveries_per_s"] else 0.0)
        for r in (plain, secure):
            rows.append([r["name"], " + ".join(r["tls_legs"]) or "none",
                         millions(r["deliveries_per_s"]), lost(r), drops(r),
                         cpu_split(r), "%.0f" % r["p99_us"],
                         "%.2fx" % ratio if r is secure else ""])
    body = (table(["case", "TLS legs", "delivered/s", "lost", "drops by reason (gatewayd)",
                   "CPU gatewayd / tools / others (cores)", "p99 us", "TLS / plain"], rows) +
            "\nThe TLS legs are the run's --tls-legs; what bounds the TLS rate is read from "
            "`perf top -p $(pidof gatewayd)` during the run (docs/benchmarks-tls.md).\n")
    for r in idle:
        body += ("\n%s: %d idle supplier connections (%d open at the gateway): gatewayd RSS "
                 "%.1f MiB with them open, %.1f MiB before: %.1f KiB per connection.\n" % (
                     r["name"], r["idle"], r["idle_accepted"], mib(r["idle_rss_kib"]),
                     mib(r["idle_base_rss_kib"]),
                     (r["idle_rss_kib"] - r["idle_base_rss_kib"]) / r["idle"]))
    return body


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


def isolation(results, rep):
    base, stall = results
    healthy_p99 = [max(r["receivers"][g]["latency_ns"]["p99"] for g in ("c1", "c2", "c3")) / 1e3
                   for r in (base, stall)]
    rows = []
    for label, r, p99 in (("without stall", base, healthy_p99[0]),
                          ("c4 stalled after 1 s", stall, healthy_p99[1])):
        worst, mean = healthy_worst_second(r)
        rows.append([label, millions(mean), millions(worst), "%.0f" % p99,
                     "%.1f" % mib(r["peak_rss_kib"]), drops(r), cpu_split(r)])
    body = table(["run", "healthy mean frames/s (each)", "healthy worst second", "healthy p99 us",
                  "gatewayd peak RSS MiB", "drops by reason", "CPU gatewayd / tools / others"],
                 rows)
    ws, mb = healthy_worst_second(stall)[0], healthy_worst_second(base)[1]
    body += ("\nHealthy worst second with the stall / healthy mean without it: %.0f%% "
             "(target >= 95%%). Healthy p99 ratio: %.2fx (target <= 1.5x). Stalled consumer's "
             "queue bound: 16 MiB (queue_bytes), so the RSS target is <= 16 + 32 MiB over the "
             "run without a stall: measured %+.1f MiB.\n" % (
                 100 * ws / mb if mb else 0,
                 healthy_p99[1] / healthy_p99[0] if healthy_p99[0] else 0,
                 mib(stall["peak_rss_kib"] - base["peak_rss_kib"])))
    return body


def scale(results, rep):
    *loads, idle = results
    rows = [[r["name"].split("-")[1], millions(r["deliveries_per_s"]), millions(r["sent_per_s"]),
             lost(r), "%.1f" % mib(r["peak_rss_kib"]), cpu_split(r), "%d" % r["corrupt"]]
            for r in loads]
    pts = [(int(r["name"].split("-")[1]), r["deliveries_per_s"] / 1e6) for r in loads]
    png = rep.plot("S6", "S6: deliveries/s vs consumers (fan-out of every frame)", "consumers",
                   "M deliveries/s", [("deliveries/s", pts)], logx=True)
    body = table(["consumers (all get every frame)", "deliveries/s", "frames in/s", "lost",
                  "gatewayd peak RSS MiB", "CPU gatewayd / tools / others", "corrupt"], rows)
    body += ("\n%d idle supplier connections (%d open at the gateway, by its "
             "gatewayd_supplier_connections): gatewayd RSS %.1f MiB with them open "
             "(%.1f MiB before they connected: %.1f KiB per connection).\n" % (
                 idle["idle"], idle["idle_accepted"], mib(idle["idle_rss_kib"]),
                 mib(idle["idle_base_rss_kib"]),
                 (idle["idle_rss_kib"] - idle["idle_base_rss_kib"]) / idle["idle"]))
    return body + (f"\n![S6]({png})\n" if png else "")


def sweep(results, rep):
    rows = [throughput_row(r, r["name"].split("-")[1]) for r in results]
    sizes = [int(r["name"].split("-")[1][:-1]) for r in results]
    png = rep.plot("sweep", "S1 payload sweep: 1 -> 1, max rate", "payload bytes",
                   "M frames/s  |  GB/s",
                   [("M frames/s", [(s, r["deliveries_per_s"] / 1e6) for s, r in zip(sizes, results)]),
                    ("GB/s", [(s, r["mb_per_s"] / 1e3) for s, r in zip(sizes, results)])],
                   logx=True)
    return (table(["payload"] + THROUGHPUT_HEAD[1:], rows) +
            (f"\n![payload sweep]({png})\n" if png else ""))


def models(by_model, rep):
    """One row per model: S1, the two mixed shapes (delivered/s and lost), S4 at 100k/s."""
    rows = []
    for name, results in by_model.items():
        if isinstance(results, str):
            rows.append([name, "skipped: " + results] + [""] * 7)
            continue
        r1, r3, ralt, r4 = results
        rows.append([name, millions(r1["deliveries_per_s"]),
                     "%s, lost %s" % (millions(r3["deliveries_per_s"]), lost(r3)),
                     "%s, lost %s" % (millions(ralt["deliveries_per_s"]), lost(ralt)),
                     "%.0f / %.0f / %.0f" % (r4["p50_us"], r4["p99_us"], r4["p999_us"]),
                     "%.4f / %.4f" % (r1["ctx_per_msg"], r4["ctx_per_msg"]), cpu_split(r1),
                     fmt(r4["promotion_p99_us"]), drops(r3)])
    return (table(["model", "S1 delivered/s", "S3 4->4 mixed delivered/s", "S3 1->4 alternating "
                   "delivered/s", "S4 p50 / p99 / p99.9 us", "ctx sw/msg S1 / S4",
                   "S1 CPU gateway / tools / others", "S4 promotion p99 us",
                   "S3 4->4 drops by reason"], rows) +
            "\nModels come from bench/model_harness/models.txt: `gatewayd` is the product, the "
            "others the model harness (bench/model_harness/); the CPU and drops columns are "
            "that process's.\n")


def one_line(r):
    """A case's result as it finishes, on the terminal."""
    return ("%.2fM deliveries/s, lost %s, drops %s, sent %.2fM/s, p50 %.0f us p99 %.0f us, "
            "gw cpu %.2f (user %.2f), tools cpu %.2f, corrupt %d" % (
                r["deliveries_per_s"] / 1e6, lost(r), drops(r), r["sent_per_s"] / 1e6,
                r["p50_us"], r["p99_us"], r["gw_cpu"] / r["wall"],
                r.get("gw_user", 0.0) / r["wall"], r["tools_cpu"] / r["wall"], r["corrupt"]))


def takeover_line(r):
    """A kill case's takeover figures (takeover.py), on the terminal."""
    t = r["takeover"]

    def m(v):
        return "n/a" if v is None else "%.2fM" % (v / 1e6)

    def s(v):
        return "n/a" if v is None else "%.2f s" % v
    return ("senders %d (%d ended without a summary), gateway read %d; "
            "before %s/s, after %s/s (lowest 100 ms %s/s), handed over %d by %s, written %s, "
            "share within %s, still held %d, no survivor live in %d of %d samples, lost %d, "
            "dup %d, logged %s" % (
                t["senders_reported"], t["silent_senders"], t["gateway_received"],
                m(t["before_per_s"]), m(t["after_per_s"]), m(t["dip_per_s"]), t["given"],
                s(t["handed_s"]), s(t["written_s"]), s(t["takeover_s"]), t["stranded"],
                t["none_live_samples"], t["samples_after"], r["lost"], r["dup"],
                t["seen_by_receiver"]))


def comparison(rows):
    """bench/models' table: one row per (case, model), medians over the rounds."""
    out = [[r["scenario"], r["model"], "%s" % millions(r["deliveries_per_s"]),
            "%d (%.1f%%)" % (r["lost"], 100 * r["lost_share"]), "%.0f" % r["p50_us"],
            "%.0f" % r["p99_us"], "%.3f" % r["cpu_us_per_frame"],
            "%.4f (%.4f + %.4f)" % (r["ctx_per_msg"], r["vol_per_frame"], r["nonvol_per_frame"]),
            "%.1f%%" % (100 * r["blocked_share"]), "%.2f%%" % (100 * r["lock_share"]),
            "%d/%d" % (r["delivered"], r["expected"]), drops(r)] for r in rows]
    return table(["case", "model", "delivered/s", "lost (median)", "p50 us", "p99 us",
                  "gateway CPU us/frame", "ctx sw/frame (vol + invol)",
                  "blocked share (lock + write)", "lock share", "delivered/expected (all rounds)",
                  "drops by reason (all rounds)"], out)


# --------------------------------------------------------------------------- files


class Report:
    def __init__(self, out_dir, stamp):
        self.out_dir = out_dir
        self.stamp = stamp
        self.commit = commit()
        # The sitting's files: NAME.md (and NAME-S6.png, NAME-sweep.png with gnuplot).
        self.name = f"{stamp}-{self.commit.split()[0]}"
        self.sections = []

    def write(self, key, title, body):
        """Adds a scenario's section; summary() writes them all in one file (one file per
        sitting: bench/results keeps sittings, not runs of a scenario)."""
        self.sections.append((title, body))

    def plot(self, name, title, xlabel, ylabel, series, logx=False):
        """series: [(label, [(x, y), ...])]; writes NAME.png (and its .dat) if gnuplot exists."""
        if not shutil.which("gnuplot"):
            return None
        dat = os.path.join(self.out_dir, f"{self.name}-{name}.dat")
        png = os.path.join(self.out_dir, f"{self.name}-{name}.png")
        with open(dat, "w") as f:
            for label, pts in series:
                f.write(f"# {label}\n" + "".join(f"{x} {y}\n" for x, y in pts) + "\n\n")
        plots = ", ".join(f"'{dat}' index {i} with linespoints lw 2 title '{label}'"
                          for i, (label, _) in enumerate(series))
        script = (f"set terminal png size 900,540\nset output '{png}'\nset title '{title}'\n"
                  f"set xlabel '{xlabel}'\nset ylabel '{ylabel}'\nset grid\nset key left top\n"
                  + ("set logscale x 2\n" if logx else "") + f"plot {plots}\n")
        subprocess.run(["gnuplot"], input=script, text=True, check=False)
        return os.path.relpath(png, self.out_dir)

    def summary(self, seconds_taken):
        parts = [f"# gatewayd benchmark, {self.stamp}, at {self.commit}\n", "## Machine\n",
                 machine(),
                 "\nCPU columns: cores used on average over the load window by gatewayd, by the "
                 "gateway-peer senders + receivers, and by everything else on the machine "
                 "(/proc/stat busy time minus the first two); the machine has %d.\n"
                 "lost: deliveries expected (frames sent x the consumers each goes to) minus "
                 "those made; drops by reason: gatewayd_consumer_dropped_messages_total over "
                 "the case.\n" % os.cpu_count(), "Run time: %.0f s.\n" % seconds_taken]
        parts += [f"\n## {title}\n\n{body}" for title, body in self.sections]
        path = os.path.join(self.out_dir, f"{self.name}.md")
        with open(path, "w") as f:
            f.write("".join(parts))
        return path


def commit():
    """The commit the sitting ran at ("<short sha>", "+ uncommitted changes" when the tree
    differs from it)."""
    def git(*a):
        return subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True).stdout
    sha = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no").strip()
    return sha + (" + uncommitted changes" if dirty else "")


def machine():
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    keep = ("Architecture", "CPU(s):", "Model name", "Thread(s) per core", "Core(s) per socket",
            "L1d", "L2", "L3", "Hypervisor vendor", "CPU max MHz")
    lines = [l.strip() for l in lscpu.splitlines() if l.strip().startswith(keep)]
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    return ("```\n" + "\n".join(lines) + "\nkernel: " + platform.release() +
            "\nload average at start: " + load + "\n```\n")
