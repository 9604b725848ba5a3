#!/usr/bin/env python3
"""Checks the PromQL of the Grafana dashboard (and of alert rule files) against a real
exposition: every metric name a query uses must be exported, and every query must parse
(promtool check rules, with each query as a recording rule).

usage: check_queries.py EXPOSITION --dashboard FILE.json [--rules FILE.yml ...] [--promtool P]
Exit 0 when all is well; 1 with one line per problem otherwise.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# Names a query may use that no gatewayd exposition carries: Prometheus makes them itself.
SYNTHETIC = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan"}
GRAFANA_RANGES = ("$__rate_interval", "$__interval", "$__range", "${__rate_interval}",
                  "${__interval}", "${__range}")


def exposition_names(path):
    names = set()
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def to_promql(expr):
    """Grafana's variables replaced by what they stand for at query time."""
    for r in GRAFANA_RANGES:
        expr = expr.replace(r, "5m")
    return re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", ".*", expr)


def metric_names(expr):
    """The metric names in a PromQL expression (a tokenizer, not a parser: strings, label
    matchers, ranges, grouping lists and function names are skipped)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word = m.group(0)
        if e[m.end():].lstrip().startswith("("):
            continue  # a function or aggregation
        if word.lower() in KEYWORDS or re.fullmatch(r"\d.*", word):
            continue
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] == "."):
            continue  # the exponent or unit of a number such as 1e-3
        names.add(word)
    return names


def dashboard_queries(path):
    with open(path) as f:
        dash = json.load(f)
    problems, queries = [], []
    if "__inputs" in dash:
        problems.append(f"{path}: uses __inputs (breaks file provisioning); use ${{datasource}}")
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    if variables.get("datasource", {}).get("type") != "datasource":
        problems.append(f"{path}: no datasource template variable named 'datasource'")

    def walk(panels):
        for p in panels:
            if p.get("type") == "row":
                walk(p.get("panels", []))
                continue
            title = p.get("title", "?")
            if p.get("datasource", {}).get("uid") != "${datasource}":
                problems.append(f"panel '{title}': datasource is not ${{datasource}}")
            targets = p.get("targets", [])
            if not targets:
                problems.append(f"panel '{title}': no query")
            for t in targets:
                if t.get("datasource", {}).get("uid") not in (None, "${datasource}"):
                    problems.append(f"panel '{title}': a target has its own datasource")
                if not t.get("expr", "").strip():
                    problems.append(f"panel '{title}': empty expr")
                    continue
                queries.append((f"panel '{title}' {t.get('refId', '')}", t["expr"]))

    walk(dash.get("panels", []))
    for name, v in variables.items():
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        m = re.fullmatch(r"\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*", q)
        if m:
            queries.append((f"variable '{name}'", m.group(1)))
        else:
            problems.append(f"variable '{name}': unsupported query {q!r}")
    return queries, problems


def rule_file_queries(path):
    # Alert files are YAML; the stdlib has no YAML parser, so take each `expr:` (inline or a
    # folded `>` block) by indentation.
    queries, lines = [], open(path).read().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)expr:\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, rest = len(m.group(1)), m.group(2).strip()
        i += 1
        if rest in (">", "|", ">-", "|-"):
            block = []
            while i < len(lines) and (not lines[i].strip() or
                                      len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i].strip())
                i += 1
            rest = " ".join(block)
        queries.append((f"{os.path.basename(path)} line {i}", rest))
    return queries


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exposition")
    ap.add_argument("--dashboard", required=True)
    ap.add_argument("--rules", action="append", default=[])
    ap.add_argument("--promtool", default="promtool")
    args = ap.parse_args()

    exported = exposition_names(args.exposition)
    queries, problems = dashboard_queries(args.dashboard)
    for r in args.rules:
        queries += rule_file_queries(r)
    if not queries:
        problems.append("no queries found")

    for where, expr in queries:
        names = metric_names(to_promql(expr))
        if not names:
            problems.append(f"{where}: no metric name in {expr!r}")
        for n in sorted(names - exported - SYNTHETIC):
            problems.append(f"{where}: metric {n} is not in the exposition")

    with tempfile.TemporaryDirectory() as d:
        rules = os.path.join(d, "dashboard_rules.yml")
        with open(rules, "w") as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n")
            for i, (_, expr) in enumerate(queries):
                f.write(f"      - record: dashboard:query_{i}\n")
                f.write(f"        expr: {json.dumps(to_promql(expr))}\n")
        r = subprocess.run([args.promtool, "check", "rules", rules], capture_output=True, text=True)
        if r.returncode != 0:
            problems.append("promtool check rules failed:\n" + r.stdout + r.stderr)

    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"OK: {len(queries)} queries parse and use only exported metrics")
    return 0


if __name__ == "__main__":
    sys.exit(main())
