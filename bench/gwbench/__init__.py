"""gatewayd's end-to-end benchmark (bench/run, bench/models): the real daemon (and, for the
patterns' comparison, the model harness of bench/model_harness/) on 127.0.0.1, driven by
gateway-peer.

- procs: every process started, ended by its PID
- probes: /proc, gatewayd's ports file and /metrics
- harness: one case end to end (receivers, gatewayd or model-harness, senders, measurement)
- models: bench/model_harness/models.txt, the models the comparison runs (model-harness
  arguments per line, and gatewayd as the reference)
- scenarios: S1..S6, the sweep and the model comparison, as a table of data
- report: Markdown tables and gnuplot plots
- run, compare: the command lines of bench/run and bench/models

Python 3 standard library only.
"""
