#!/usr/bin/env python3
"""An OTLP/HTTP JSON receiver for measuring the tracing overhead (docs/reference/benchmarks.md):
the tests' receiver (tests/support/otlp_receive.py) on a fixed port; prints the span count when
stopped (SIGINT or SIGTERM).
    python3 bench/otlp_sink.py PORT"""
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from otlp_receive import Receiver  # noqa: E402

receiver = Receiver(int(sys.argv[1]))
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
signal.signal(signal.SIGINT, lambda *_: done.set())
done.wait()
receiver.stop()
print(f"otlp_sink: {len(receiver.spans)} spans, {len(receiver.problems)} problems", flush=True)
