#!/usr/bin/env python3
"""Runs the alert rules' unit tests with `promtool test rules`, after checking that every rule
of the rules file has at least one case where it fires and one where it must stay silent.

usage: alert_rules_test.py TESTS.yml --rules RULES.yml [--promtool P]
The rules file given replaces the tests' own rule_files (so a test can be pointed at another
version of it). Exit 0 when all is well; 1 with one line per problem otherwise.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def rule_names(path):
    return re.findall(r"^\s*-\s*alert:\s*(\S+)\s*$", open(path).read(), re.M)


def cases(text):
    """(alertname, fires) for each alert_rule_test entry: fires is False for `exp_alerts: []`."""
    out = []
    for m in re.finditer(r"alertname:\s*(\S+)\s*\n\s*exp_alerts:\s*(\[\])?", text):
        out.append((m.group(1), m.group(2) is None))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tests")
    ap.add_argument("--rules", required=True)
    ap.add_argument("--promtool", default="promtool")
    args = ap.parse_args()

    text = open(args.tests).read()
    problems = []
    names = rule_names(args.rules)
    if not names:
        problems.append(f"{args.rules}: no alert rules found")
    seen = cases(text)
    for n in names:
        if (n, True) not in seen:
            problems.append(f"alert {n}: no test case where it fires")
        if (n, False) not in seen:
            problems.append(f"alert {n}: no test case where it stays silent")
    for n in sorted({n for n, _ in seen}):
        if n not in names:
            problems.append(f"test case for {n}: no such alert in {args.rules}")

    rules = os.path.abspath(args.rules)
    text, n = re.subn(r"(?m)^rule_files:\s*\n(\s+-\s*.*\n)+", f"rule_files:\n  - {rules}\n", text)
    if n != 1:
        problems.append(f"{args.tests}: no rule_files list to point at {rules}")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, os.path.basename(args.tests))
        with open(path, "w") as f:
            f.write(text)
        r = subprocess.run([args.promtool, "test", "rules", path], capture_output=True, text=True)
        sys.stdout.write(r.stdout + r.stderr)
        if r.returncode != 0:
            problems.append("promtool test rules failed (above)")

    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"OK: {len(names)} alert rules, {len(seen)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
