#!/usr/bin/env python3
"""Runs docs/examples/tracing against a loopback OTLP/HTTP receiver (tests/support/otlp_receive.py)
and checks the span tree it sends: the run, its two steps, the two nodes, and the node's own
span under its node. Usage: tracing_check.py TRACING_PROGRAM"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from otlp_receive import Receiver, tree  # noqa: E402

receiver = Receiver()
run = subprocess.run([sys.argv[1], receiver.endpoint], capture_output=True, text=True, timeout=60)
receiver.stop()
print(run.stdout, run.stderr, sep="")
spans = receiver.spans
print(tree(spans))
names = sorted(s["name"] for s in spans)
by_id = {s["id"]: s for s in spans}
own = [s for s in spans if s["name"] == "crm lookup"]
ok = (run.returncode == 0 and "traced: lookup done, 6 spans sent" in run.stdout and not receiver.problems
      and names == sorted(["invoke_agent desk", "step 1", "step 2", "node lookup", "node reply", "crm lookup"])
      and len({s["trace"] for s in spans}) == 1
      and len(own) == 1 and by_id[own[0]["parent"]]["name"] == "node lookup"
      and own[0]["attributes"].get("crm.customer") == "c-42" and own[0]["attributes"].get("crm.hits") == 2
      and all(s["resource"].get("service.name") == "support-desk" for s in spans))
print("problems:", receiver.problems)
print("tracing_check:", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
