"""A throwaway PKI for the TLS scenario, made with the openssl CLI in the run's work directory:
one CA, and a certificate each for the gateway (its supplier listener, and its client side on
the consumer leg), the suppliers (mutual TLS) and the consumers (gateway-peer recv)."""

import os
import subprocess

GATEWAY_NAME = "gateway.bench"
CONSUMER_NAME = "consumer.bench"
# P-256 keys: what a deployment would pick, and cheap handshakes.
KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (args[0], r.stderr.strip()))


def make(directory):
    """Makes the files once; returns {name: path} for ca.crt and NAME.crt/NAME.key of gateway,
    supplier and consumer."""
    os.makedirs(directory, exist_ok=True)
    _openssl(["req", "-x509", *KEY, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
              "-subj", "/CN=gwbench-ca"], directory)
    for name, cn in (("gateway", GATEWAY_NAME), ("supplier", "supplier.bench"),
                     ("consumer", CONSUMER_NAME)):
        _openssl(["req", *KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                  "-subj", f"/CN={cn}", "-addext", f"subjectAltName=DNS:{cn}"], directory)
        _openssl(["x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                  "-CAcreateserial", "-copy_extensions", "copy", "-days", "2",
                  "-out", f"{name}.crt"], directory)
    files = {"ca": "ca.crt"}
    for name in ("gateway", "supplier", "consumer"):
        files[name + "_crt"], files[name + "_key"] = f"{name}.crt", f"{name}.key"
    return {k: os.path.join(directory, v) for k, v in files.items()}
