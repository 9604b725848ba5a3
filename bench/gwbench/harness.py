"""One benchmark case end to end: gateway-peer receivers (the consumers), a gatewayd (or the model
harness, bench/model_harness/) on a generated configuration, gateway-peer senders (the
suppliers); measured from /proc, from the gateway's /metrics and from the receivers' JSON
summaries."""

import dataclasses
import json
import os
import re
import signal
import socket
import statistics
import ssl
import subprocess
import tempfile
import time

from . import pki, probes, procs, takeover
from .models import GATEWAYD


@dataclasses.dataclass
class Sender:
    """One `gateway-peer send`: frame i of each connection to addresses[i mod k]."""
    addresses: list
    size: int = 128
    rate: int = 0  # frames/s over its connections; 0 = as fast as it goes
    connections: int = 1
    confirm_window: int = 0  # send --confirm --window N (0: plain frames, nothing confirmed)
    spread: int = 0  # send --spread N: each address gets a numbered last token, N of them


@dataclasses.dataclass
class Case:
    name: str
    receivers: dict  # receiver process -> the consumer names it plays (one connection each)
    routes: dict  # match -> consumer names
    senders: list
    fanout: int = 1  # deliveries each frame sent should make
    consumer_extra: str = ""  # TOML lines for every consumer (overflow, capacity, ...)
    stall: dict = dataclasses.field(default_factory=dict)  # receiver -> stall after S seconds
    idle_suppliers: int = 0  # idle connections opened before the load
    seconds: float = 0  # load time; 0 = the run's --seconds
    min_seconds: float = 0
    tls: bool = False  # TLS on the legs the run's --tls-legs names (mutual TLS, P-256)
    direct: bool = False  # no gateway: the senders write to the receiver (the machine's floor)
    ack: bool = False  # the receivers acknowledge (recv --ack; the consumers need ack = true)
    # group name -> the consumer names that are its members (one `endpoints = [...]` consumer;
    # the routes name the group). A member's receiver sees every n-th frame of a stream: its
    # sequence gaps are the other members' frames, `lost` counts from the totals.
    groups: dict = dataclasses.field(default_factory=dict)
    balance: str = "round-robin"
    recv_rate: int = 0  # every receiver's recv --rate (frames/s it reads at most); 0 = no cap
    # receiver -> SIGKILL it S seconds after the senders start (by its PID). The run then samples
    # /metrics every 100 ms and reads every receiver's --seen-log: takeover.py's figures.
    kill: dict = dataclasses.field(default_factory=dict)


class Harness:
    def __init__(self, build_dir, threads, tls_legs="both"):
        self.gatewayd = os.path.join(build_dir, "gateway", "gatewayd")
        self.peer = os.path.join(build_dir, "tools", "gateway-peer")
        self.model_harness = os.path.join(build_dir, "bench", "model-harness")
        self.threads = threads
        self.work = tempfile.mkdtemp(prefix="gatewayd-bench-")
        self.seq = 0
        self.tls_legs = tls_legs  # "supplier" or "both" (supplier and consumer legs)
        self.dead_cpu = {}  # pid -> CPU seconds of a receiver killed on purpose, before it died
        # bench/curves: time GET /readyz (median of 5) half-way through each case's load.
        self.probe_readyz = False
        self.readyz = None
        self._pki = None

    def pki(self):
        if self._pki is None:
            self._pki = pki.make(os.path.join(self.work, "pki"))
        return self._pki

    def legs(self, case):
        """The legs of `case` that speak TLS: set(), {"supplier"} or {"supplier", "consumer"}."""
        if not case.tls:
            return set()
        return {"supplier", "consumer"} if self.tls_legs == "both" else {"supplier"}

    def path(self, name):
        """A fresh file name in the work directory (case and model names may hold '/')."""
        self.seq += 1
        return os.path.join(self.work, f"{self.seq:03d}-" + re.sub(r"[^\w.+-]", "_", name))

    def write_config(self, model_keys, routes, endpoints, consumer_extra, max_suppliers,
                     legs=frozenset(), groups=None, balance="round-robin"):
        d = self.path("config")
        os.makedirs(d)
        tls_line = ""
        if "consumer" in legs:
            k = self.pki()
            tls_line = (f'tls = {{ ca = "{k["ca"]}", server_name = "{pki.CONSUMER_NAME}", '
                        f'cert = "{k["gateway_crt"]}", key = "{k["gateway_key"]}" }}\n')
        groups = groups or {}
        members = {m for ms in groups.values() for m in ms}
        parts = [f'[consumers.{n}]\nendpoint = "{ep}"\n{tls_line}{consumer_extra}\n'
                 for n, ep in endpoints.items() if n not in members]
        for g, ms in groups.items():
            eps = ", ".join('"%s"' % endpoints[m] for m in ms)
            parts.append(f'[consumers.{g}]\nendpoints = [{eps}]\nbalance = "{balance}"\n'
                         f'{tls_line}{consumer_extra}\n')
        parts += ["[[routes]]\nmatch = \"%s\"\nto = [%s]\n" % (m, ", ".join(f'"{t}"' for t in to))
                  for m, to in routes.items()]
        with open(os.path.join(d, "routes.toml"), "w") as f:
            f.write("\n".join(parts))
        gw = ['supplier_listen = "127.0.0.1:0"', 'routes_file = "routes.toml"',
              f"threads = {self.threads}", "drain_timeout_ms = 1000", "idle_timeout_ms = 0"]
        if max_suppliers:
            gw.append(f"max_supplier_connections = {max_suppliers}")
        gw += [f"{k} = {v}" for k, v in model_keys]
        tls = ""
        if "supplier" in legs:
            k = self.pki()
            tls = (f'\n[tls]\ncert = "{k["gateway_crt"]}"\nkey = "{k["gateway_key"]}"\n'
                   f'client_ca = "{k["ca"]}"\n')
        with open(os.path.join(d, "gatewayd.toml"), "w") as f:
            f.write("[gateway]\n" + "\n".join(gw) +
                    '\n\n[metrics]\nlisten = "127.0.0.1:0"\n\n[log]\nlevel = "info"\n' + tls)
        return os.path.join(d, "gatewayd.toml")

    # ----------------------------------------------------------------------- one case

    def run(self, case, seconds, model=GATEWAYD):
        """`model` (models.Model): the real gatewayd, or a line of the model harness."""
        seconds = max(case.seconds or seconds, case.min_seconds)
        if case.direct:
            return self.run_direct(case, seconds)
        receivers = self.start_receivers(case)
        endpoints = {n: f"127.0.0.1:{port}" for _, _, port, names in receivers.values()
                     for n in names}
        cfg = self.write_config(model.keys, case.routes, endpoints, case.consumer_extra,
                                case.idle_suppliers + 100 if case.idle_suppliers else 0,
                                self.legs(case), case.groups, case.balance)
        try:
            member_of = {m: g for g, ms in case.groups.items() for m in ms}
            names = [f"{member_of[n]}/{ep}" if n in member_of else n
                     for n, ep in endpoints.items()]
            gw, sport, mport = self.start_gateway(case.name, cfg, names, model)
        except RuntimeError:
            for p, *_ in receivers.values():  # the run goes on with the next model
                procs.end(p)
            raise
        res = {"name": case.name, "tls_legs": sorted(self.legs(case))}
        if case.idle_suppliers:
            res.update(self.idle_connections(gw, sport, mport, case.idle_suppliers,
                                             "supplier" in self.legs(case)))
        before = self.counters(gw, receivers, mport)
        t0 = time.time()
        if case.kill:
            sent, sent_rate, sender_cpu, timeline = self.send_killing(case, sport, mport, seconds,
                                                                      receivers)
        else:
            sent, sent_rate, sender_cpu = self.send(case, sport, seconds, mport)
        self.settle(mport)
        if case.kill:
            takeover.wait_acknowledged(mport)
        wall = time.time() - t0
        after = self.counters(gw, receivers, mport)
        res.update(peak_rss_kib=probes.status_kib(gw.pid, "VmHWM"),
                   rss_kib=probes.status_kib(gw.pid, "VmRSS"), rss_before_kib=before["rss"])
        procs.end(gw)
        recv = {g: self.summary(p, out) for g, (p, out, _, _) in receivers.items()}
        res.update(self.measure(case, recv, before, after, wall, sent, sent_rate, sender_cpu,
                                self.threads or os.cpu_count()))
        res.update(self.settlement)
        if self.readyz is not None:
            res["readyz_ms"] = self.readyz
        if case.kill:
            # The killed receiver left no summary: lost and duplicates come from the frames'
            # identities every receiver logged, not from the receivers' totals.
            res.update(takeover.figures(case, timeline, self.seen_paths, receivers, sent,
                                        int(res["received_by_gw"]), self.silent_senders))
        return res

    def run_direct(self, case, seconds):
        """The same load straight into one receiver: GWP/1 frames reach a consumer byte for
        byte as a supplier sent them, so what this measures is the loopback path and the two
        tools alone, on this machine, at this moment: the floor under the gateway's figures."""
        receivers = self.start_receivers(case)
        (p, out, port, _), = receivers.values()
        busy0, recv0 = probes.system_busy_seconds(), probes.cpu_seconds(p.pid)
        t0 = time.time()
        sent, sent_rate, sender_cpu = self.send(case, port, seconds)
        time.sleep(0.2)  # the kernel's socket buffers into the receiver
        wall = time.time() - t0
        busy, recv_cpu = probes.system_busy_seconds() - busy0, probes.cpu_seconds(p.pid) - recv0
        r = self.summary(p, out)
        delivered = r.get("frames", 0)
        lost = max(0, sent - delivered)
        lat = r.get("latency_ns", {})
        res = {"name": case.name, "tls_legs": [], "sent": sent, "sent_per_s": sent_rate,
               "delivered": delivered, "deliveries_per_s": r.get("frames_per_s", 0.0),
               "lost": lost, "lost_share": lost / sent if sent else 0.0, "drops": {},
               "wall": wall, "gw_cpu": 0.0, "sender_cpu": sender_cpu, "recv_cpu": recv_cpu,
               "tools_cpu": sender_cpu + recv_cpu, "machine_busy": busy,
               "promotion_p99_us": None, "promotions": 0, "ctx_per_msg": 0.0,
               "gaps": r.get("lost", 0), "dup": r.get("duplicated", 0),
               "reordered": r.get("reordered", 0), "corrupt": r.get("corrupt", 0),
               "receivers": {"direct": r}}
        for q in ("p50", "p99", "p999", "max"):
            res[q + "_us"] = lat.get(q, 0) / 1e3
        return res

    def start_receivers(self, case):
        receivers = {}
        self.seen_paths = {}
        for g, names in case.receivers.items():
            out, err = self.path(f"{case.name}-{g}.json"), self.path(f"{case.name}-{g}.err")
            cmd = [self.peer, "recv", "--listen", "127.0.0.1:0", "--json"]
            if case.ack:
                cmd += ["--ack"]
            if g in case.stall:
                cmd += ["--stall-after", str(case.stall[g])]
            if case.recv_rate:
                cmd += ["--rate", str(case.recv_rate)]
            if case.kill:
                self.seen_paths[g] = self.path(f"{case.name}-{g}.seen")
                cmd += ["--seen-log", self.seen_paths[g]]
            if "consumer" in self.legs(case):
                k = self.pki()
                cmd += ["--tls-cert", k["consumer_crt"], "--tls-key", k["consumer_key"],
                        "--tls-client-ca", k["ca"]]
            p = procs.start(cmd, out, err)
            port = probes.listening_port(err, 10)
            if port is None:
                raise RuntimeError(f"{case.name}: gateway-peer recv did not start: see {err}")
            receivers[g] = (p, out, port, names)
        return receivers

    def start_gateway(self, name, cfg, consumers, model=GATEWAYD):
        """gatewayd, or the model harness with the model's arguments, on `cfg`; once every
        consumer is connected: (process, supplier port, metrics port)."""
        program = self.gatewayd if model.product else self.model_harness
        log, ports_path = self.path(f"{name}-gateway.log"), self.path(f"{name}-ports.json")
        gw = procs.start([program, "--config", cfg, "--ports-file", ports_path, *model.args], log)
        ports = probes.ports_file(ports_path, gw, 20)
        if ports is None:
            procs.end(gw)
            with open(log, errors="replace") as f:
                why = f.read().strip().splitlines()
            raise RuntimeError(f"{name}: {os.path.basename(program)} did not start"
                               + (f": {why[-1]}" if why else "") + f" (see {log})")
        sport, mport = probes.port_of(ports["supplier"]), probes.port_of(ports["metrics"])
        if not probes.consumers_connected(mport, consumers, 60):
            procs.end(gw)
            raise RuntimeError(f"{name}: consumers did not all connect: see {log}")
        return gw, sport, mport

    def send(self, case, sport, seconds, mport=None):
        """Runs the senders to their end: (frames sent, frames/s, their CPU seconds)."""
        running = self.start_senders(case, sport, seconds)
        self.readyz = None
        if self.probe_readyz and mport:
            time.sleep(seconds / 2)
            self.readyz = statistics.median(probes.readyz_ms(mport)[1] for _ in range(5))
        return self.senders_done(running, seconds + 60)

    def send_killing(self, case, sport, mport, seconds, receivers):
        """send() while SIGKILLing the receivers of case.kill on time and sampling the group
        members' counters every 100 ms: (sent, frames/s, CPU seconds, timeline), the timeline
        {"samples": [(t, {metric: {member: value}})], "killed": {receiver: t}}, t in seconds
        since the senders started."""
        running = self.start_senders(case, sport, seconds)
        t0 = time.time()
        kills = sorted((t, g) for g, t in case.kill.items())
        samples, killed = [], {}
        tick = t0
        while time.time() < t0 + seconds:
            while kills and time.time() - t0 >= kills[0][0]:
                _, g = kills.pop(0)
                pid = receivers[g][0].pid
                self.dead_cpu[pid] = probes.cpu_seconds(pid)  # /proc forgets it once reaped
                os.kill(pid, signal.SIGKILL)  # a receiver this run started
                killed[g] = time.time() - t0
            text = probes.scrape(mport)
            samples.append((time.time() - t0, takeover.member_counters(text)))
            tick += 0.1
            time.sleep(max(0.0, tick - time.time()))
        for g in killed:
            procs.reap(receivers[g][0], 5)
        # Past their time the senders get 10 s more, all together: a group that keeps its
        # suppliers paused (its dead member full under backpressure) would keep them forever.
        sent, rate, cpu = self.senders_done(running, 10.0)
        return sent, rate, cpu, {"samples": samples, "killed": killed}

    def start_senders(self, case, sport, seconds):
        running = []
        for s in case.senders:
            cmd = [self.peer, "send", "--to", f"127.0.0.1:{sport}", "--address",
                   ",".join(s.addresses), "--size", str(s.size), "--duration", str(seconds),
                   "--connections", str(s.connections), "--json"]
            if s.rate:
                cmd += ["--rate", str(s.rate)]
            if s.confirm_window:
                cmd += ["--confirm", "--window", str(s.confirm_window)]
            if s.spread:
                cmd += ["--spread", str(s.spread)]
            if "supplier" in self.legs(case):
                k = self.pki()
                cmd += ["--tls-ca", k["ca"], "--tls-cert", k["supplier_crt"], "--tls-key",
                        k["supplier_key"], "--tls-server-name", pki.GATEWAY_NAME]
            out = self.path(f"{case.name}-send.json")
            running.append((procs.start(cmd, out, out + ".err"), out))
        return running

    def senders_done(self, running, grace):
        """Reaps the senders, SIGKILLing those still running `grace` seconds from now (one
        deadline for all); self.silent_senders counts those that left no summary."""
        sent, rate, cpu = 0, 0.0, 0.0
        deadline = time.time() + grace
        self.silent_senders = 0
        # What confirm-mode senders saw settle: the run's result reports them.
        self.settlement = {"confirmed": 0, "unconfirmed": 0, "rejected": 0, "resent": 0}
        for p, out in running:
            usage = procs.reap(p, max(0.1, deadline - time.time()))
            cpu += usage.ru_utime + usage.ru_stime
            with open(out) as f:
                js = json.loads(f.read() or "{}")
            self.silent_senders += not js
            sent += js.get("frames", 0)
            rate += js.get("frames_per_s", 0.0)
            for k in self.settlement:
                self.settlement[k] += js.get(k, 0)
        return sent, rate, cpu

    @staticmethod
    def settle(mport, timeout=10.0):
        """Waits until gatewayd's queue depths and sent counter stand still: what it read has
        been written, dropped, or sits with a consumer that does not read (S5)."""
        deadline, last = time.time() + timeout, None
        while time.time() < deadline:
            text = probes.scrape(mport)
            now = (probes.metric_sum(text, "gatewayd_consumer_queue_depth"),
                   probes.metric_sum(text, "gatewayd_consumer_messages_sent_total"))
            if now == last:
                break
            last = now
            time.sleep(0.2)
        time.sleep(0.2)  # the kernel's socket buffers into the receivers

    def counters(self, gw, receivers, mport):
        text = probes.scrape(mport)
        return {"cpu": probes.cpu_seconds(gw.pid), "user": probes.cpu_seconds(gw.pid, True),
                "busy": probes.system_busy_seconds(),
                "ctx": probes.ctx_switches(gw.pid), "rss": probes.status_kib(gw.pid, "VmRSS"),
                "recv_cpu": sum(self.dead_cpu.get(r[0].pid) or probes.cpu_seconds(r[0].pid)
                                for r in receivers.values()),
                "metrics": text}

    @staticmethod
    def summary(p, out):
        procs.end(p)
        with open(out) as f:
            text = f.read()
        return json.loads(text) if text.strip() else {}

    @staticmethod
    def measure(case, recv, before, after, wall, sent, sent_rate, sender_cpu, threads):
        m0, m1 = before["metrics"], after["metrics"]

        def delta(name, label):
            a, b = probes.sums_by(m0, name, label), probes.sums_by(m1, name, label)
            return {k: v - a.get(k, 0.0) for k, v in b.items()}

        def total(key):
            return sum(r.get(key, 0) for r in recv.values())

        delivered = total("frames")
        expected = sent * case.fanout
        lost = max(0, expected - (delivered - total("duplicated")))
        drops = {k: int(v) for k, v in delta("gatewayd_consumer_dropped_messages_total",
                                             "reason").items() if v}
        blocked = delta("gatewayd_consumer_blocked_seconds_total", "cause")
        # The pool's own count where it has one (Leader/Followers), else the configured one.
        threads = probes.metric_sum(m1, "gatewayd_lf_threads") or threads
        lat = [r["latency_ns"] for r in recv.values() if r.get("latency_ns", {}).get("count")]
        res = {
            "sent": sent, "sent_per_s": sent_rate, "expected": expected, "delivered": delivered,
            "deliveries_per_s": total("frames_per_s"), "mb_per_s": total("mb_per_s"),
            "lost": lost, "lost_share": lost / expected if expected else 0.0, "drops": drops,
            "gaps": total("lost"), "dup": total("duplicated"), "reordered": total("reordered"),
            "corrupt": total("corrupt"), "receivers": recv, "wall": wall,
            "gw_cpu": after["cpu"] - before["cpu"], "gw_user": after["user"] - before["user"],
            "sender_cpu": sender_cpu,
            "recv_cpu": after["recv_cpu"] - before["recv_cpu"],
            "machine_busy": after["busy"] - before["busy"],
            "ctx_vol": after["ctx"][0] - before["ctx"][0],
            "ctx_nonvol": after["ctx"][1] - before["ctx"][1],
            "unroutable": probes.metric_sum(m1, "gatewayd_messages_unroutable_total"),
            "received_by_gw": probes.metric_sum(m1, "gatewayd_supplier_messages_received_total"),
            "threads": threads, "blocked_lock_s": blocked.get("lock", 0.0),
            "blocked_write_s": blocked.get("write", 0.0),
        }
        res["tools_cpu"] = res["sender_cpu"] + res["recv_cpu"]
        res["promotion_p99_us"], res["promotions"] = probes.promotion_p99_us(m1)
        for q in ("p50", "p99", "p999", "max"):
            res[q + "_us"] = max((x[q] for x in lat), default=0) / 1e3
        frames = max(delivered, 1)
        res["ctx_per_msg"] = (res["ctx_vol"] + res["ctx_nonvol"]) / frames
        res["cpu_us_per_frame"] = 1e6 * res["gw_cpu"] / frames
        res["user_us_per_frame"] = 1e6 * res["gw_user"] / frames
        res["blocked_share"] = (res["blocked_lock_s"] + res["blocked_write_s"]) / (threads * wall)
        res["lock_share"] = res["blocked_lock_s"] / (threads * wall)
        return res

    def idle_connections(self, gw, port, mport, n, tls=False):
        """Opens n idle supplier connections (handshaken, with TLS), measures the gateway's RSS,
        closes them."""
        base = probes.status_kib(gw.pid, "VmRSS")
        wrap = None
        if tls:
            k = self.pki()
            ctx = ssl.create_default_context(cafile=k["ca"])
            ctx.load_cert_chain(k["supplier_crt"], k["supplier_key"])
            wrap = lambda s: ctx.wrap_socket(s, server_hostname=pki.GATEWAY_NAME)  # noqa: E731
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            socks.append(wrap(s) if wrap else s)
        # The gateway accepts (and handshakes) asynchronously: wait for its metrics to show
        # them all.
        deadline = time.time() + 60
        while time.time() < deadline:
            text = probes.scrape(mport)
            accepted = probes.metric_sum(text, "gatewayd_supplier_connections")
            handshakes = probes.metric_sum(text, "gatewayd_supplier_tls_handshakes_total")
            if accepted >= n and (not tls or handshakes >= n):
                break
            time.sleep(0.2)
        rss, hwm = probes.status_kib(gw.pid, "VmRSS"), probes.status_kib(gw.pid, "VmHWM")
        for s in socks:
            s.close()
        return {"idle": n, "idle_rss_kib": rss, "idle_base_rss_kib": base, "idle_hwm_kib": hwm,
                "idle_accepted": int(accepted)}
