#!/usr/bin/env python3
"""Reads a LeakSanitizer report and fails if ReactiveUV's own code definitely lost memory.

A "direct" leak (LeakSanitizer's name for valgrind's "definitely lost") counts
against us when any frame of its allocation stack is in Sources/ReactiveUV,
Sources/ReactiveUVTesting or samples/. Indirect leaks (blocks reachable only
from other leaked blocks) and leaks wholly inside the toolchain's libraries
(XCTest, Foundation) are listed for information.
"""
import re
import sys

OURS = ("/Sources/ReactiveUV/", "/Sources/ReactiveUVTesting/", "/samples/")

def main(path):
    text = open(path, errors="replace").read()
    blocks = re.split(r"\n(?=(?:Direct|Indirect) leak of )", text)
    ours, others, indirect = [], [], 0
    for block in blocks:
        header = re.match(r"(Direct|Indirect) leak of (\d+) byte\(s\) in (\d+) object", block)
        if not header:
            continue
        kind, size = header.group(1), int(header.group(2))
        if kind == "Indirect":
            indirect += size
            continue
        frames = [line.strip() for line in block.splitlines() if re.match(r"\s*#\d+ ", line)]
        if any(marker in frame for frame in frames for marker in OURS):
            ours.append((size, frames))
        else:
            others.append((size, frames))
    print(f"leak report: {len(ours)} definite leak(s) from our code, "
          f"{len(others)} elsewhere ({sum(s for s, _ in others)} bytes), {indirect} bytes indirect")
    for size, frames in others:
        where = next((f for f in frames if "XCTest" in f or "Foundation" in f), frames[-1] if frames else "?")
        print(f"  not ours: {size} bytes via {where[:160]}")
    for size, frames in ours:
        print(f"OUR LEAK: {size} bytes")
        for frame in frames[:14]:
            print("    " + frame[:200])
    return 1 if ours else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
