"""Where a replica's event loop spent a stall: a py-spy raw profile summed by thread and package.

    .venv/bin/python benchmarks/profile_summary.py build/bad-day-profile/stall-lock.txt [SECONDS]

The input is what `BAD_DAY_PROFILE=FOLDER` makes the bad-day phase record (py-spy's raw
collapsed stacks, with thread ids, 200 samples a second, idle threads left out). Printed:
each thread's samples as a share of the window (how busy it was), then the event loop's
(MainThread's) samples by the package of the innermost frame and by the outermost frame
of ours or the SDK's, so a reader sees what ran on the loop while the store stalled.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

RATE = 200  # samples a second, as the bad-day phase records them
DEFAULT_SECONDS = 8.0  # the phase's STALL_SECONDS
TOP = 12
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^:()]+)(?::[0-9]+)?\)$")


def _package(frame: str) -> str:
    match = _FRAME.match(frame)
    if match is None:
        return frame
    file = match["file"]
    return file.split("/", 1)[0] if "/" in file else file.removesuffix(".py")


def summarize(path: Path, seconds: float) -> str:
    """Return the summary of one raw profile as text."""
    threads: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    entries: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack or not samples.isdigit():
            continue
        frames = stack.split(";")
        thread = frames[0].split(": ", 1)[-1]
        threads[thread] += int(samples)
        if thread == "MainThread" and len(frames) > 1:
            leaves[_package(frames[-1])] += int(samples)
            ours = [f for f in frames[1:] if _package(f) in ("ticket_tools", "mcp")]
            entries[ours[-1] if ours else _package(frames[-1])] += int(samples)
    window = seconds * RATE
    lines = [f"{path.name}: {window:.0f} sample slots ({seconds:g} s at {RATE}/s)"]
    for thread, count in threads.most_common():
        lines.append(f"  {thread:<24} busy {count * 100 / window:5.1f}% of the window")
    loop = threads.get("MainThread", 0) or 1
    lines.append("  the event loop by the package of the innermost frame:")
    for package, count in leaves.most_common(TOP):
        lines.append(f"    {count * 100 / loop:5.1f}%  {package}")
    lines.append("  the event loop by the innermost frame of ticket_tools or the SDK:")
    for frame, count in entries.most_common(TOP):
        lines.append(f"    {count * 100 / loop:5.1f}%  {frame}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the summary of the profile named on the command line."""
    args = sys.argv[1:] if argv is None else argv
    seconds = float(args[1]) if len(args) > 1 else DEFAULT_SECONDS
    print(summarize(Path(args[0]), seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
