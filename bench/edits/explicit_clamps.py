#!/usr/bin/env python3
"""An edit of any generated WGSL (issue 25, session 36): every index of a storage, workgroup or
function-scope array becomes min(index, last element), as Dawn's robustness transform (Tint)
clamps them, so that the edited kernel run with `--no-bounds-checks` (Dawn's disable_robustness:
no Tint clamps and no Vulkan robustBufferAccess) separates what the clamps themselves cost from
what the rest of robustness costs. Vectors indexed at run time are left alone (Tint clamps those
too). The output is the same (certify it with --no-bounds-checks).

usage: explicit_clamps.py < generated.wgsl > edited.wgsl
"""
import re
import sys

STORAGE = re.compile(r"var<storage[^>]*>\s+(\w+)\s*:\s*array<")
WORKGROUP = re.compile(r"var<workgroup>\s+(\w+)\s*:\s*array<.*,\s*([^,<>]+)>\s*;")
LOCAL = re.compile(r"var\s+(\w+)\s*=\s*array<\w+,\s*([^,<>]+)>\(\)")


def module_limits(text):
    found = {name: "arrayLength(&%s) - 1u" % name for name in STORAGE.findall(text)}
    for name, size in WORKGROUP.findall(text):
        found[name] = "(%s) - 1u" % size.strip()
    return found


def function_limits(function_text, arrays):
    found = dict(arrays)  # a function's own arrays hide the module's of the same name
    for name, size in LOCAL.findall(function_text):
        found[name] = "(%s) - 1u" % size.strip()
    return found


def matching_bracket(text, open_at):
    depth = 0
    for at in range(open_at, len(text)):
        if text[at] == "[":
            depth += 1
        elif text[at] == "]":
            depth -= 1
            if depth == 0:
                return at
    sys.exit("edit: unbalanced brackets")


def clamp(text, arrays):
    pattern = re.compile(r"\b(%s)\[" % "|".join(sorted(arrays, key=len, reverse=True)))
    out = []
    at = 0
    while True:
        match = pattern.search(text, at)
        if not match:
            out.append(text[at:])
            return "".join(out)
        open_at = match.end() - 1
        close_at = matching_bracket(text, open_at)
        # Constant indices are clamped too: the compiler folds those.
        index = "min(%s, %s)" % (clamp(text[open_at + 1:close_at], arrays), arrays[match.group(1)])
        out.append(text[at:open_at + 1] + index + "]")
        at = close_at + 1


def main():
    if len(sys.argv) != 1:
        sys.exit(__doc__)
    text = sys.stdin.read()
    arrays = module_limits(text)
    if not arrays:
        sys.exit("edit: no arrays found")
    # Function by function, each with its own arrays (the same name has other sizes elsewhere).
    starts = [m.start() for m in re.finditer(r"^fn |^@compute", text, re.M)] + [len(text)]
    out = [text[:starts[0]]]
    for begin, end in zip(starts, starts[1:]):
        out.append(clamp(text[begin:end], function_limits(text[begin:end], arrays)))
    sys.stdout.write("".join(out))


main()
