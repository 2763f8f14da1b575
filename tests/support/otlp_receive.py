"""A loopback OTLP/HTTP receiver (JSON encoding) for the tests that run programs with tracing:
it keeps the spans POSTed to /v1/traces and prints them as a tree. Neither Debian nor npm
packages an OpenTelemetry collector or another OTLP receiver, so this stands in for one; it
refuses what a collector's JSON decoder would (ids of the wrong length, times not decimal
strings), with the problem recorded in `problems`."""
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HEX = re.compile(r"^[0-9a-f]+$")


def _value(v):
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "boolValue" in v:
        return v["boolValue"]
    if "doubleValue" in v:
        return v["doubleValue"]
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"]["values"]]
    raise ValueError(f"unknown attribute value {v}")


class Receiver:
    def __init__(self, port=0):
        self.spans, self.problems, self.lock = [], [], threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver._take(self.path, self.headers.get("Content-Type"), body)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_port}/v1/traces"

    def _take(self, path, content_type, body):
        with self.lock:
            if path != "/v1/traces" or content_type != "application/json":
                self.problems.append(f"POST {path} as {content_type}")
                return
            try:
                for rs in json.loads(body)["resourceSpans"]:
                    resource = {a["key"]: _value(a["value"]) for a in rs["resource"]["attributes"]}
                    for ss in rs["scopeSpans"]:
                        for s in ss["spans"]:
                            self.spans.append(self._span(s, resource))
            except (ValueError, KeyError) as e:
                self.problems.append(f"malformed request: {e!r}")

    def _span(self, s, resource):
        for key, n in (("traceId", 32), ("spanId", 16), ("parentSpanId", 16)):
            if key in s and not (len(s[key]) == n and HEX.match(s[key])):
                self.problems.append(f"{key} {s[key]!r} is not {n} hex digits")
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            if not isinstance(s[key], str) or not s[key].isdigit():
                self.problems.append(f"{key} is not a decimal string")
        return {"trace": s["traceId"], "id": s["spanId"], "parent": s.get("parentSpanId", ""), "name": s["name"],
                "kind": s["kind"], "start": int(s["startTimeUnixNano"]), "end": int(s["endTimeUnixNano"]),
                "status": s.get("status", {}).get("code", 0), "resource": resource,
                "attributes": {a["key"]: _value(a["value"]) for a in s["attributes"]}}

    def stop(self):
        self.server.shutdown()


def tree(spans, keys=("gen_ai.request.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                      "gen_ai.tool.name", "stategraph.status")):
    """The spans as an indented tree (children in start order), with a few attributes."""
    by_parent = {}
    ids = {s["id"] for s in spans}
    for s in sorted(spans, key=lambda s: s["start"]):
        by_parent.setdefault(s["parent"] if s["parent"] in ids else "", []).append(s)
    lines = []

    def walk(parent, depth):
        for s in by_parent.get(parent, []):
            shown = [f"{k.split('.')[-1]}={s['attributes'][k]}" for k in keys if k in s["attributes"]]
            ms = (s["end"] - s["start"]) / 1e6
            lines.append(f"{'  ' * depth}{s['name']}  ({ms:.2f} ms{', ' if shown else ''}{', '.join(shown)})")
            walk(s["id"], depth + 1)

    walk("", 0)
    return "\n".join(lines)


def svg(spans, title=""):
    """The spans as a waterfall picture (SVG), as trace viewers draw them: one row per span in
    tree order, indented by depth, a bar from its start to its end on the root's time axis."""
    from html import escape
    ids = {s["id"] for s in spans}
    by_parent = {}
    for s in sorted(spans, key=lambda s: s["start"]):
        by_parent.setdefault(s["parent"] if s["parent"] in ids else "", []).append(s)
    rows = []

    def walk(parent, depth):
        for s in by_parent.get(parent, []):
            rows.append((depth, s))
            walk(s["id"], depth + 1)

    walk("", 0)
    if not rows:
        return "<svg xmlns='http://www.w3.org/2000/svg'/>"
    t0 = min(s["start"] for _, s in rows)
    t1 = max(s["end"] for _, s in rows)
    span_ns = max(t1 - t0, 1)
    label_w, bar_w, row_h, top = 330, 520, 18, 34
    width, height = label_w + bar_w + 90, top + row_h * len(rows) + 10
    colors = {"invoke_agent": "#4e79a7", "step": "#9c9c9c", "node": "#59a14f", "chat": "#e15759", "execute_tool": "#f28e2b"}
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' font-family='monospace' font-size='11'>",
           f"<rect width='{width}' height='{height}' fill='white'/>",
           f"<text x='8' y='16' font-size='13' font-weight='bold'>{escape(title)}</text>",
           f"<text x='{label_w}' y='28' fill='#555'>0 ms</text>",
           f"<text x='{label_w + bar_w}' y='28' fill='#555' text-anchor='end'>{span_ns / 1e6:.1f} ms</text>"]
    for i, (depth, s) in enumerate(rows):
        y = top + i * row_h
        kind = s["name"].split(" ")[0]
        color = "#d62728" if s["status"] == 2 else colors.get(kind, "#76b7b2")
        x = label_w + bar_w * (s["start"] - t0) / span_ns
        w = max(bar_w * (s["end"] - s["start"]) / span_ns, 1.5)
        out.append(f"<text x='{8 + 12 * depth}' y='{y + 12}'>{escape(s['name'][:44])}</text>")
        out.append(f"<rect x='{x:.1f}' y='{y + 3}' width='{w:.1f}' height='{row_h - 6}' fill='{color}'/>")
        out.append(f"<text x='{label_w + bar_w + 6}' y='{y + 12}' fill='#555'>{(s['end'] - s['start']) / 1e6:.2f} ms</text>")
    out.append("</svg>")
    return "\n".join(out)
