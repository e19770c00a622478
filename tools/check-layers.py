#!/usr/bin/env python3
"""The layering of hangscope's areas, checked against the sources and the docs.

Usage: tools/check-layers.py AREAS_TXT SOURCE_DIR [--graphviz DOT]
Exit:  0 every include goes downward and the docs show the graph; 1 a violation (one FAIL
       line each, naming the file, line, include and the areas it may use); 2 bad usage.

AREAS_TXT is the graph CMake writes (build/areas.txt, cmake/HangscopeAreas.cmake): one
"AREA: DEPENDS..." line per area, bottom-up. The build already refuses an upward link and an
upward include (an area sees only the headers of the areas it links); this check says it in
words, and also holds what the compiler cannot see:
- every folder of src/ and include/hangscope/ is an area of the graph, and every area is
  declared after the areas it depends on (no cycle);
- every `#include "hangscope/AREA/..."` in src/X/ and include/hangscope/X/ names X itself or an
  area X declares (DEPENDS in src/CMakeLists.txt): the declared edges, not what lies below them (hangscope/v1/ is the protobuf code of the
  areas that link hangscope_proto; hangscope/version.h is common's);
- docs/architecture.md carries the same graph, in the block after "<!-- areas.txt -->";
- with --graphviz, the target graph CMake itself draws (`cmake --graphviz=DOT BUILD_DIR`) links
  the hangscope_AREA libraries exactly as areas.txt says: one library per area, no upward edge.
"""

import re
import sys
from pathlib import Path

GENERATED = {"v1", "version.h"}


def read_graph(path):
    graph, order = {}, []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        name, _, depends = line.partition(":")
        graph[name.strip()] = depends.split()
        order.append(name.strip())
    return graph, order


def closure(graph, area, seen=None):
    seen = set() if seen is None else seen
    for dependency in graph.get(area, []):
        if dependency not in seen:
            seen.add(dependency)
            closure(graph, dependency, seen)
    return seen


def check(graph, order, root):
    problems = []
    for index, area in enumerate(order):
        for dependency in graph[area]:
            if dependency not in order[:index]:
                problems.append(f"areas.txt: {area} depends on {dependency}, which is not below it")
    folders = {p.name for p in (root / "src").iterdir() if p.is_dir()}
    folders |= {p.name for p in (root / "include" / "hangscope").iterdir() if p.is_dir()}
    for folder in sorted(folders - set(graph)):
        problems.append(f"src/{folder} or include/hangscope/{folder}: a folder that is no area "
                        f"(declare it with hangscope_area in src/CMakeLists.txt)")
    for area in order:
        allowed = set(graph[area]) | {area}
        for base in (root / "src" / area, root / "include" / "hangscope" / area):
            for file in sorted(base.rglob("*")) if base.is_dir() else []:
                if file.suffix not in (".h", ".cpp"):
                    continue
                text = file.read_bytes().decode("utf-8", errors="replace")
                for number, line in enumerate(text.splitlines(), 1):
                    match = re.match(r'\s*#\s*include\s+"hangscope/([^/"]+)', line)
                    if not match or match.group(1) in GENERATED or match.group(1) in allowed:
                        continue
                    used = match.group(1)
                    why = ("an area above it" if area in closure(graph, used) else
                           "an area it does not declare (add it to DEPENDS if it is below)"
                           if used in graph else "no area")
                    problems.append(
                        f"{file.relative_to(root)}:{number}: the {area} area includes "
                        f"hangscope/{used}/, {why}; {area} may use {', '.join(sorted(allowed))}")
    return problems


def check_docs(order, graph, root):
    doc = root / "docs" / "architecture.md"
    text = doc.read_text(encoding="utf-8")
    match = re.search(r"<!-- areas.txt -->\n```\n(.*?)```", text, re.S)
    expected = "".join(f"{a}: {' '.join(graph[a])}\n" for a in order)
    if not match:
        return [f"{doc.relative_to(root)}: no graph block after '<!-- areas.txt -->'"]
    if match.group(1) != expected:
        return [f"{doc.relative_to(root)}: the graph block differs from build/areas.txt; it "
                f"should read:\n{expected}"]
    return []


def check_graphviz(graph, dot):
    """The hangscope_AREA libraries and their link edges in CMake's own graph."""
    text = Path(dot).read_text(encoding="utf-8", errors="replace")
    labels = dict(re.findall(r'"(node\d+)"\s*\[\s*label\s*=\s*"([^"]+)"', text))
    areas = {node: label[len("hangscope_"):] for node, label in labels.items()
             if label.startswith("hangscope_") and label[len("hangscope_"):] in graph}
    problems = [f"{dot}: no library for area {a}" for a in sorted(set(graph) - set(areas.values()))]
    edges = set()
    for source, target in re.findall(r'"(node\d+)"\s*->\s*"(node\d+)"', text):
        if source in areas and target in areas:
            edges.add((areas[source], areas[target]))
    declared = {(a, d) for a, depends in graph.items() for d in depends}
    for source, target in sorted(edges - declared):
        why = "upward" if source in closure(graph, target) else "undeclared"
        problems.append(f"{dot}: hangscope_{source} links hangscope_{target} ({why})")
    for source, target in sorted(declared - edges):
        problems.append(f"{dot}: areas.txt says {source} links {target}; CMake's graph does not")
    return problems, len(edges)


def main():
    args = sys.argv[1:]
    dot = None
    if len(args) == 4 and args[2] == "--graphviz":
        dot, args = args[3], args[:2]
    if len(args) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    graph, order = read_graph(args[0])
    root = Path(args[1]).resolve()
    problems = check(graph, order, root) + check_docs(order, graph, root)
    if dot:
        dot_problems, edges = check_graphviz(graph, dot)
        problems += dot_problems
        print(f"CMake's target graph ({dot}): {edges} links between the {len(order)} area "
              f"libraries")
    for problem in problems:
        print(f"FAIL: {problem}")
    print(f"{'FAIL' if problems else 'ok'}: {len(problems)} layering problem(s); {len(order)} "
          f"areas, bottom-up: {' < '.join(order)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
