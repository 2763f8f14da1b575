#!/usr/bin/env python3
"""The pictures in docs/pictures/ are the examples' graphs as our own write_dot draws them today.

usage: check_pictures.py ROOT GLOBAL_SUPERVISOR_BINARY SUPPORT_DOT

- docs/pictures/global_supervisor.dot must equal `global_supervisor dot` (the example's graph);
- docs/pictures/support_desk.dot must equal SUPPORT_DOT, the file docs/examples/agent_app.cpp
  writes with app.write_dot;
- each .svg beside them must name every node of its .dot (rendered from it by Graphviz's dot).
Refresh them with scripts/pictures.
"""
import html
import pathlib
import re
import subprocess
import sys


def nodes_of(dot_text):
    # node statements: "name"; or "name" [label=...] (not edges: "a" -> "b")
    return set(re.findall(r'^\s*"([^"]+)"\s*[\[;]', dot_text, re.M))


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    root, gs_binary, support_dot = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
    pictures = root / "docs" / "pictures"
    drawn = subprocess.run([gs_binary, "dot"], check=True, capture_output=True, text=True, timeout=60).stdout
    if not support_dot.exists():
        print(f"{support_dot} is missing: docs_example_agent_app writes it", file=sys.stderr)
        return 1
    current = {"global_supervisor": drawn, "support_desk": support_dot.read_text()}
    failed = False
    for name, text in current.items():
        committed = (pictures / f"{name}.dot").read_text()
        if committed != text:
            print(f"docs/pictures/{name}.dot is not the graph write_dot draws today: run scripts/pictures", file=sys.stderr)
            failed = True
        svg = (pictures / f"{name}.svg").read_text()
        names = nodes_of(committed)
        if not names:
            print(f"docs/pictures/{name}.dot has no node statements", file=sys.stderr)
            failed = True
        missing = sorted(n for n in names if f"<title>{html.escape(n, quote=False)}</title>" not in svg)
        if missing:
            print(f"docs/pictures/{name}.svg does not show {missing}: run scripts/pictures", file=sys.stderr)
            failed = True
        print(f"{name}: {len(names)} nodes, .dot current, .svg shows them all" if not failed else f"{name}: checked")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
