"""The README's code that says where it comes from is that code.

A fenced block in README.md or in docs/*.md that follows a line
    <!-- from: PATH -->
must be in PATH (relative to the repository): its lines, stripped of
leading and trailing blanks, must be lines of PATH in the same order, each
after the one before (other lines may lie between them). PATH is built,
run and checked by the test suite, so what the README shows runs. The
README must hold at least one such snippet of C++ (a .cpp file) and one of
Python (a .py file): its two examples."""

import argparse
import pathlib
import re
import sys

MARK = re.compile(r"^<!-- from: (\S+) -->$")


def snippets(readme):
    lines = readme.read_text().splitlines()
    i = 0
    while i < len(lines):
        mark = MARK.match(lines[i].strip())
        i += 1
        if not mark:
            continue
        if i >= len(lines) or not lines[i].startswith("```"):
            yield mark.group(1), i, None
            continue
        start = i + 1
        end = start
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        yield mark.group(1), start + 1, lines[start:end]
        i = end + 1


def check(root, document, failures):
    """Checks document's marked snippets; returns the paths they come from."""
    name = document.relative_to(root).as_posix()
    paths = []
    for path, line_number, block in snippets(document):
        paths.append(path)
        if block is None:
            failures.append(f"{name}:{line_number}: a from: mark ({path}) not followed by a fenced block")
            continue
        source = root / path
        if not source.is_file():
            failures.append(f"{name}:{line_number}: {path} does not exist")
            continue
        source_lines = [line.strip() for line in source.read_text().splitlines()]
        at = 0
        for offset, line in enumerate(block):
            wanted = line.strip()
            if not wanted:
                continue
            try:
                at = source_lines.index(wanted, at) + 1
            except ValueError:
                failures.append(f"{name}:{line_number + offset}: not in {path} (in order): {wanted}")
                break
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", required=True, type=pathlib.Path)
    arguments = parser.parse_args()
    root = arguments.root
    failures = []
    readme_paths = check(root, root / "README.md", failures)
    count = len(readme_paths)
    for document in sorted((root / "docs").glob("*.md")):
        count += len(check(root, document, failures))
    for suffix, kind in ((".cpp", "C++"), (".py", "Python")):
        if not any(path.endswith(suffix) for path in readme_paths):
            failures.append(f"README.md has no checked {kind} snippet (<!-- from: PATH{suffix} --> mark)")
    for failure in failures:
        print(failure)
    print(f"{count} snippets checked (README.md and docs/*.md), {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
