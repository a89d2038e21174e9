#!/usr/bin/env python3
"""Copies the marked snippets of docs/cpp-api.md into the build tree, for
tests/docs/test_docs_snippets.cpp to compile and check as the docs print them.

A block is marked by an HTML comment (invisible when the Markdown is rendered) on the line
right before its fence:

    <!-- snippet: tensors_autograd -->                ```cpp statements: included in a TEST_CASE
    <!-- snippet: custom_module scope=namespace -->    ```cpp class or function: outside any
    <!-- snippet: print_arange -->                    ```text: a string literal of the block

For each marked block NAME this writes OUT/docs_snippets/NAME.inc with the block's lines at
their docs line numbers (blank lines pad the top, so a compiler error's line is the docs' line).
A ```cpp block has its #include lines blanked (OUT/docs_snippets/includes.h has the union of
them) and `using namespace kiln;` dropped (the test has it); on the fence's line it gets a check
of its scope: an expression statement compiles only in a function, `namespace {}` only outside.
A ```text block becomes a raw string literal of its lines (no newline after the last).

It fails, naming the snippet and the line, when a marker is malformed or not followed by a
```cpp or ```text fence, a block is empty or unterminated, a name is used twice, a name listed by
CMake (--names) is not marked in the docs or a marked one is not listed, or the test (--test) does
not include a listed snippet or includes one that is not listed.

Run by CMake at build time (tests/CMakeLists.txt, "docs: the snippets of docs/cpp-api.md");
by hand:
  python3 tests/docs/extract_snippets.py --doc docs/cpp-api.md --out /tmp/snippets \
      --test tests/docs/test_docs_snippets.cpp --names tensors_autograd ...
"""

import argparse
import os
import re
import sys

MARKER = re.compile(r"^<!--\s*snippet:\s*(?P<body>.*?)\s*-->\s*$")
NAME = re.compile(r"^[a-z][a-z0-9_]*$")
SCOPES = ("function", "namespace")
INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"]")
INCLUDED = re.compile(r"^\s*#\s*include\s*\"docs_snippets/([A-Za-z0-9_]+)\.inc\"", re.M)


class SnippetError(Exception):
    pass


def fail(where, message):
    raise SnippetError(f"{where}: error: {message}")


def parse_marker(doc, lineno, line):
    """The marker on `line` as (name, scope); None when the line is no marker."""
    if not line.lstrip().startswith("<!--") or "snippet" not in line:
        return None
    m = MARKER.match(line.strip())
    if not m:
        fail(f"{doc}:{lineno}", f"malformed snippet marker {line.strip()!r}: "
             "write <!-- snippet: NAME --> or <!-- snippet: NAME scope=namespace -->")
    words = m.group("body").split()
    if not words or not NAME.match(words[0]):
        fail(f"{doc}:{lineno}", f"snippet marker {line.strip()!r}: the name must be lower-case "
             "letters, digits and underscores, starting with a letter")
    name, scope = words[0], "function"
    for option in words[1:]:
        key, _, value = option.partition("=")
        if key != "scope" or value not in SCOPES:
            fail(f"{doc}:{lineno}", f"snippet '{name}': unknown option {option!r} "
                 f"(the only option is scope={'|'.join(SCOPES)})")
        scope = value
    return name, scope


def read_snippets(doc, text):
    """The marked blocks of the docs, in order: dicts of name, scope, marker line, first code
    line (1-based) and the block's lines."""
    lines = text.split("\n")
    snippets, seen = [], {}
    i = 0
    while i < len(lines):
        marker = parse_marker(doc, i + 1, lines[i])
        if marker is None:
            i += 1
            continue
        name, scope = marker
        if name in seen:
            fail(f"{doc}:{i + 1}", f"snippet '{name}' is named twice (first on line {seen[name]})")
        seen[name] = i + 1
        fence = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if fence not in ("```cpp", "```text"):
            fail(f"{doc}:{i + 1}", f"snippet '{name}': the marker is not followed by a ```cpp (or "
                 "```text) fence on the next line")
        kind = fence[3:]
        if kind == "text" and scope != "function":
            fail(f"{doc}:{i + 1}", f"snippet '{name}': a ```text block takes no scope option")
        start = i + 2  # 0-based index of the first code line
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            if parse_marker(doc, end + 1, lines[end]) is not None:
                break
            end += 1
        if end >= len(lines) or lines[end].strip() != "```":
            fail(f"{doc}:{i + 2}", f"snippet '{name}': the ```{kind} block has no closing ``` fence")
        body = lines[start:end]
        code = [l for l in body if l.strip() and (kind == "text" or (
            not l.strip().startswith("//") and not INCLUDE.match(l)
            and l.strip() != "using namespace kiln;"))]
        if not code:
            fail(f"{doc}:{i + 1}", f"snippet '{name}': the marked block has no code")
        if kind == "text" and any(")kiln_snippet\"" in l for l in body):
            fail(f"{doc}:{i + 1}", f"snippet '{name}': the text holds the raw string's delimiter")
        snippets.append({"name": name, "kind": kind, "scope": scope, "marker": i + 1,
                         "first": start + 1, "lines": body})
        i = end + 1
    return snippets


def check_names(doc, test, test_text, snippets, names):
    marked = {s["name"]: s for s in snippets}
    for name in names:
        if name not in marked:
            fail(doc, f"snippet '{name}' is listed in kiln_docs_snippets (tests/CMakeLists.txt) but "
                 f"no ```cpp block of {doc} is marked <!-- snippet: {name} -->")
    for s in snippets:
        if s["name"] not in names:
            fail(f"{doc}:{s['marker']}", f"snippet '{s['name']}' is marked here but not listed in "
                 "kiln_docs_snippets (tests/CMakeLists.txt), so nothing would compile it")
    if test is None:
        return
    included = set(INCLUDED.findall(test_text))
    for name in names:
        if name not in included:
            fail(test, f"snippet '{name}' is never included: add "
                 f"#include \"docs_snippets/{name}.inc\" to a TEST_CASE (or at namespace scope)")
    for name in sorted(included - set(names)):
        fail(test, f"includes docs_snippets/{name}.inc, which kiln_docs_snippets "
             "(tests/CMakeLists.txt) does not list")


def render(doc, s):
    first = s["first"]
    out = [""] * (first - 1 + len(s["lines"]))
    out[0] = (f"// Generated from {doc}, snippet '{s['name']}' (lines {first}-"
              f"{first + len(s['lines']) - 1}), by tests/docs/extract_snippets.py: edit the docs, "
              "not this file. Each line is at its docs line number.")
    fence = first - 2  # 0-based index of the fence's line, always after line 1
    if s["kind"] == "text":
        for k, line in enumerate(s["lines"]):
            out[first - 1 + k] = line
        out[first - 1] = 'R"kiln_snippet(' + out[first - 1]
        out[-1] += ')kiln_snippet"'
        return "\n".join(out) + "\n", []
    if s["scope"] == "namespace":
        out[fence] = (f"namespace {{}}  // snippet '{s['name']}' is scope=namespace: "
                      "include it outside any function")
    else:
        out[fence] = (f"(void)\"snippet '{s['name']}' is scope=function: include it inside a "
                      "function\";")
    includes = []
    for k, line in enumerate(s["lines"]):
        if INCLUDE.match(line):
            includes.append(line.strip())
        elif line.strip() != "using namespace kiln;":
            out[first - 1 + k] = line
    return "\n".join(out) + "\n", includes


def write(path, text):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--doc", required=True, help="docs/cpp-api.md")
    ap.add_argument("--out", required=True, help="folder that gets docs_snippets/")
    ap.add_argument("--test", help="the test that includes the snippets (checked)")
    ap.add_argument("--root", help="the source tree: generated files name the docs from it")
    ap.add_argument("--names", nargs="+", required=True, help="the snippets to extract")
    args = ap.parse_args()
    doc = args.doc  # as given (CMake: absolute), so that an error's file:line opens in an editor
    try:
        with open(args.doc, encoding="utf-8") as f:
            snippets = read_snippets(doc, f.read())
        test_text = None
        if args.test:
            with open(args.test, encoding="utf-8") as f:
                test_text = f.read()
        check_names(doc, args.test, test_text, snippets, args.names)
    except SnippetError as e:
        print(e, file=sys.stderr)
        return 1

    folder = os.path.join(args.out, "docs_snippets")
    os.makedirs(folder, exist_ok=True)
    shown = os.path.relpath(args.doc, args.root) if args.root else args.doc
    union = []
    for s in snippets:
        text, includes = render(shown, s)
        write(os.path.join(folder, s["name"] + ".inc"), text)
        union += [i for i in includes if i not in union]
    # A snippet dropped from the list leaves no stale file behind to be included by mistake.
    for f in os.listdir(folder):
        if f.endswith(".inc") and f[:-4] not in args.names:
            os.remove(os.path.join(folder, f))
    header = [f"// The #include lines of the snippets of {shown} (tests/docs/extract_snippets.py).",
              "#pragma once", ""] + union
    write(os.path.join(folder, "includes.h"), "\n".join(header) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
