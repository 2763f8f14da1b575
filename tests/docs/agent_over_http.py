#!/usr/bin/env python3
"""Runs docs/examples/agent_app as the agents guide shows it against a model server: a loopback
OpenAI-compatible server (plain http, base URL ending in /v1) that asks for two tools, then
answers. Checks the approval, the answer, and that the second request holds the whole
conversation (system, user, the assistant's tool calls, both tool results).
Usage: agent_over_http.py AGENT_APP WORK_DIR"""
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

requests = []


class Model(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        requests.append((self.path, [m["role"] for m in body["messages"]]))
        if body["messages"][-1]["role"] == "user":
            calls = [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": '{"order":"A-17"}'}}
                     for i, name in enumerate(["order_status", "refund"])]
            message = {"role": "assistant", "content": None, "tool_calls": calls}
        else:
            message = {"role": "assistant", "content": "Refunded A-17, which arrived damaged."}
        out = json.dumps({"id": "r", "object": "chat.completion", "model": body.get("model"),
                          "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Model)
threading.Thread(target=server.serve_forever, daemon=True).start()
app, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
db = os.path.join(work, "agent_http.db")
for f in (db, db + "-wal", db + "-shm"):
    if os.path.exists(f):
        os.remove(f)
env = dict(os.environ, STATEGRAPH_MODEL_URL=f"http://127.0.0.1:{server.server_port}/v1", STATEGRAPH_MODEL="local")
run = subprocess.run([app, db], cwd=work, env=env, capture_output=True, text=True, timeout=120)
print(run.stdout, run.stderr, sep="")
want_roles = ["system", "user", "assistant", "tool", "tool"]
ok = (run.returncode == 0 and '"tool":"refund"' in run.stdout
      and "assistant: Refunded A-17, which arrived damaged." in run.stdout
      and [p for p, _ in requests] == ["/v1/chat/completions"] * 2 and requests[1][1] == want_roles)
print("requests:", requests)
print("agent_over_http:", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
