#!/usr/bin/env python3
"""Checks that the C++ in README.md and docs/ is code that is compiled.

A C++ block (```cpp) must follow a marker line
    <!-- snippet: PATH#NAME -->
and equal, line for line, the region of PATH (from the source root) between `// [snippet NAME]`
and `// [end]` (either indented), less the region's common indentation. A block that cannot be compiled on its own
(a reference sketch of several calls) is marked `<!-- fragment -->` instead; they are counted
and listed, so the list can only shrink on purpose. Usage: check_snippets.py SOURCE_ROOT
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
marker = re.compile(r"^<!-- snippet: (\S+)#(\S+) -->$")
failures, fragments, checked = [], [], 0


def region(path, name):
    lines = (root / path).read_text().splitlines()
    begin = next((i for i, l in enumerate(lines) if l.strip() == f"// [snippet {name}]"), None)
    if begin is None:
        return None
    end = next(i for i in range(begin + 1, len(lines)) if lines[i].strip() == "// [end]")
    body = lines[begin + 1:end]
    indent = min((len(l) - len(l.lstrip(" ")) for l in body if l.strip()), default=0)
    return [l[indent:] for l in body]


docs = [root / "README.md"] + sorted((root / "docs").rglob("*.md"))
for doc in docs:
    lines = doc.read_text().splitlines()
    rel = doc.relative_to(root)
    i = 0
    while i < len(lines):
        if lines[i].strip() in ("```cpp", "```c++"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            block = lines[i + 1:end]
            prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            m = marker.match(prev.strip())
            if prev.strip() == "<!-- fragment -->":
                fragments.append(f"{rel}:{i + 1}")
            elif not m:
                failures.append(f"{rel}:{i + 1}: a C++ block without `<!-- snippet: FILE#NAME -->` "
                                "(or `<!-- fragment -->`) on the line before it")
            else:
                want = region(m.group(1), m.group(2))
                if want is None:
                    failures.append(f"{rel}:{i + 1}: {m.group(1)} has no region `// [snippet {m.group(2)}]`")
                elif want != block:
                    diff = next((n for n, (a, b) in enumerate(zip(want, block)) if a != b), min(len(want), len(block)))
                    failures.append(f"{rel}:{i + 1}: differs from {m.group(1)}#{m.group(2)} at its line {diff + 1}:\n"
                                    f"    file: {want[diff] if diff < len(want) else '(end)'}\n"
                                    f"    doc:  {block[diff] if diff < len(block) else '(end)'}")
                else:
                    checked += 1
            i = end + 1
        else:
            i += 1

print(f"{checked} C++ blocks match compiled files; {len(fragments)} marked as fragments:")
for f in fragments:
    print(f"  {f}")
for f in failures:
    print(f"error: {f}")
sys.exit(1 if failures or checked == 0 else 0)
