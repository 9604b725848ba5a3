"""What drive.py uses to reach the booted systemd and the gateway in it: commands in the
booted root, its files and journal, and loopback GWP/1 suppliers and consumers."""
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.environ["GATEWAYD_TEST_ROOT"]  # /proc/<pid>/root: the booted root seen from the host
SYSTEMD_PID = os.environ["GATEWAYD_TEST_SYSTEMD_PID"]
UNIT = "gatewayd.service"
T0 = time.monotonic()


def log(msg):
    print(f"[drive +{time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)
    log(f"ok: {what}")


def in_root(*args, timeout=60, ok=True):
    cmd = ["nsenter", "-t", SYSTEMD_PID, "-m", "-p", "-u", "-i", "--", "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "TERM=dumb",
           "SYSTEMD_COLORS=0", "SYSTEMD_PAGER=", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if ok and r.returncode != 0:
        raise Failure(f"{' '.join(args)} exited {r.returncode}: {r.stdout}{r.stderr}")
    return r


def show(*props):
    out = in_root("systemctl", "show", UNIT, *(f"-p{p}" for p in props)).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def eventually(pred, timeout, what, interval=0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failure(f"timed out after {timeout} s: {what}")
        time.sleep(interval)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def frame(address, payload):
    a = address.encode()
    return b"GW\x01\x00" + struct.pack(">HI", len(a), len(payload)) + a + payload


class Consumer:
    """A GWP/1 consumer endpoint on 127.0.0.1: accepts the gateway's (re)connections and
    records every whole frame; a malformed byte stream is recorded as corruption."""

    def __init__(self, name, port=0):
        self.name = name
        self.frames = []
        self.connections = 0
        self.corrupt = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(8)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn):
        buf = b""
        conn.settimeout(0.5)
        with conn:
            while self.running:
                try:
                    data = conn.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if not data:
                    break
                buf += data
                while len(buf) >= 10:
                    if buf[:4] != b"GW\x01\x00":
                        with self.lock:
                            self.corrupt.append(buf[:16])
                        return
                    alen, plen = struct.unpack(">HI", buf[4:10])
                    if len(buf) < 10 + alen + plen:
                        break
                    address = buf[10:10 + alen].decode()
                    payload = buf[10 + alen:10 + alen + plen]
                    buf = buf[10 + alen + plen:]
                    with self.lock:
                        self.frames.append((address, payload))

    def got(self, address, payload):
        with self.lock:
            return (address, payload) in self.frames

    def close(self):
        self.running = False
        self.sock.close()


def metric(port, series):
    """The value of one series on the gateway's /metrics, or None while it is not there."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            body = b""
            while chunk := s.recv(65536):
                body += chunk
    except OSError:
        return None
    m = re.search(rf"^{re.escape(series)} (\S+)$", body.decode(errors="replace"), re.M)
    return float(m.group(1)) if m else None


def send(port, frames, timeout=10):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"".join(frame(a, p) for a, p in frames))
        s.shutdown(socket.SHUT_WR)
        s.settimeout(2)
        try:
            s.recv(1)  # the gateway sends nothing back; wait briefly for an orderly close
        except OSError:
            pass


def send_tls(port, frames, context, consumer, timeout=10):
    """Sends frames over TLS (`context`: an ssl client context), waits until `consumer` has them
    all, then says close_notify: what the gateway read is routed before the connection ends."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        with context.wrap_socket(raw, server_hostname="gateway.test") as s:
            s.sendall(b"".join(frame(a, p) for a, p in frames))
            ok = all(_wait_frame(consumer, a, p, timeout) for a, p in frames)
            try:
                s.unwrap()
            except (OSError, ssl.SSLError):
                pass
            return ok


class Pki:
    """A CA, the gateway's certificate (SAN DNS:gateway.test) and a supplier's (CN orders-svc),
    made with the openssl CLI in a temporary directory of the host."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gatewayd-systemd-pki.")
        key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        run = lambda *args: subprocess.run(["openssl", *args], cwd=self.dir, check=True,
                                           capture_output=True, timeout=60)
        run("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=gatewayd test CA")
        for name, cn, ext in (("gateway", "gateway.test", ["-addext", "subjectAltName=DNS:gateway.test"]),
                              ("orders", "orders-svc", [])):
            run("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", *ext)
            run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-copy_extensions", "copy", "-out", f"{name}.crt", "-days", "2")

    def path(self, name):
        return os.path.join(self.dir, name)

    def supplier_context(self):
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        c.load_verify_locations(self.path("ca.crt"))
        c.load_cert_chain(self.path("orders.crt"), self.path("orders.key"))
        return c

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def delivered(port, address, consumer, timeout, tag):
    """Sends uniquely tagged frames until one reaches the consumer (a restarted gateway may
    still be dialling it); returns the seconds it took."""
    start = time.monotonic()
    n = 0

    def attempt():
        nonlocal n
        n += 1
        payload = f"{tag}-{n}".encode()
        try:
            send(port, [(address, payload)])
        except OSError:
            return False
        return _wait_frame(consumer, address, payload, 2)

    eventually(attempt, timeout, f"a frame to {address} reaches {consumer.name} ({tag})", 0.1)
    return time.monotonic() - start


def _wait_frame(consumer, address, payload, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if consumer.got(address, payload):
            return True
        time.sleep(0.05)
    return False


def port_answers(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False


def journal(since_cursor=None):
    args = ["journalctl", "-u", UNIT, "--no-pager", "-o", "short-monotonic"]
    if since_cursor:
        args += ["--after-cursor", since_cursor]
    return in_root(*args).stdout


def journal_cursor():
    out = in_root("journalctl", "-u", UNIT, "-n", "0", "--show-cursor", "--no-pager", ok=False)
    m = re.search(r"-- cursor: (\S+)", out.stdout)
    return m.group(1) if m else None


def write_root_file(path, text):
    """Replaces a file of the booted root at once (write aside, rename), as an editor does:
    the gateway also watches its configuration files and must never read half an edit."""
    tmp = f"{ROOT}{path}.drive-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.rename(tmp, ROOT + path)


def routes(billing, audit, extra=""):
    return f"""# written by tests/systemd/drive.py
[consumers.billing]
endpoint = "127.0.0.1:{billing.port}"

[consumers.audit]
endpoint = "127.0.0.1:{audit.port}"

[[routes]]
match = "orders.*.created"
to = ["billing"]
{extra}"""


def exposure(text):
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", text)
    if not m:
        raise Failure(f"no exposure level in:\n{text}")
    return float(m.group(1))
