#!/usr/bin/env python3
"""The Global Supervisor's traces (issue 28, item 3), as an operator would collect them: three
processes with --otlp pointed at a loopback OTLP/HTTP receiver (tests/support/otlp_receive.py):
a multi-agent turn, a turn that stops with a question, and its resume in another process. Checks
one trace per turn, the resume continuing the interrupted turn's trace under its run span, the
parallel agents under one step, and prints the trees (docs/observability.md shows them).
Usage: traces_test.py GLOBAL_SUPERVISOR [--svg FILE]   (FILE: the multi-agent turn as a waterfall)"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "support"))
from otlp_receive import Receiver, svg, tree  # noqa: E402

binary = sys.argv[1]
receiver = Receiver()
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED:", what)


with tempfile.TemporaryDirectory(prefix="sg-traces-") as work:
    db = os.path.join(work, "gs.db")
    env = dict(os.environ)
    for v in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME"):
        env.pop(v, None)

    def turn(*args):
        r = subprocess.run([binary, *args, "--db", db, "--otlp", receiver.endpoint], capture_output=True, text=True,
                           timeout=120, env=env)
        print("$", " ".join(args[:3]), "->", r.returncode)
        check(r.returncode == 0, f"{args[0]} exited {r.returncode}: {r.stderr.strip()}")
        return len(receiver.spans)

    plan_end = turn("chat", "--thread", "t1", "Plan my week: book flights to Zurich and review my portfolio")
    ask_end = turn("chat", "--thread", "t2", "Thomas is traveling to Mallorca")
    turn("resume", "--thread", "t2", "Thomas Berger")
receiver.stop()

spans = receiver.spans
by_id = {s["id"]: s for s in spans}
runs = [s for s in spans if s["name"] == "invoke_agent global_supervisor"]
check(len(runs) == 3, f"three turns, three runs (got {len(runs)})")
check(not receiver.problems, f"the receiver refused: {receiver.problems}")
check(all(s["resource"].get("service.name") == "global_supervisor" for s in spans), "service.name global_supervisor")
if len(runs) == 3:
    plan, ask, answer = sorted(runs, key=lambda s: s["start"])
    check(plan["parent"] == "" and ask["parent"] == "", "a new message starts a trace")
    check(plan["trace"] != ask["trace"], "two messages, two traces")
    check(ask["attributes"].get("stategraph.status") == "interrupted", "the question stops the run")
    check(answer["trace"] == ask["trace"] and answer["parent"] == ask["id"],
          "the resume, in another process, continues the interrupted turn's trace under its run")
    check(answer["attributes"].get("stategraph.status") == "done", "the resume ends the turn")
    plan_spans = [s for s in spans if s["trace"] == plan["trace"]]
    agents = [s for s in plan_spans if s["name"] == "node agent_execution"]
    check(len(agents) == 2 and agents[0]["parent"] == agents[1]["parent"], "two agents, one step")
    steps = [s for s in plan_spans if s["name"].startswith("step ")]
    check(all(by_id[s["parent"]]["name"].startswith("invoke_agent") for s in steps), "steps under runs")
    nodes = [s for s in plan_spans if s["name"].startswith("node ")]
    check(all(by_id[s["parent"]]["name"].startswith("step ") for s in nodes), "nodes under steps")
    check(any(s["name"] == "node disambiguation_blocking" and s["attributes"].get("stategraph.status") == "interrupted"
              for s in spans if s["trace"] == ask["trace"]), "the asking node's span says interrupted")
    for s in spans:
        if s["parent"] in by_id:
            p = by_id[s["parent"]]
            if s["trace"] != p["trace"]:
                check(False, f"{s['name']} is in another trace than its parent")
    print("\n-- the multi-agent turn --")
    print(tree(plan_spans))
    if "--svg" in sys.argv:
        with open(sys.argv[sys.argv.index("--svg") + 1], "w") as f:
            f.write(svg(plan_spans, "global_supervisor: one multi-agent turn (spans as an OTLP receiver got them)"))
    print("\n-- the question, and its resume in another process --")
    print(tree([s for s in spans if s["trace"] == ask["trace"]]))
print("traces_test:", "ok" if not failures else f"FAILED ({len(failures)})")
sys.exit(0 if not failures else 1)
