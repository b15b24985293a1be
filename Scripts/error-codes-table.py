#!/usr/bin/env python3
"""Prints the README's error-code table from the doc comments in VerificationError.swift."""
import re, pathlib
src = (pathlib.Path(__file__).resolve().parent.parent / "Sources/IAPCore/VerificationError.swift").read_text()
retry = re.search(r"retryableCodes: Set<Code> = \[(.*?)\]", src, re.S).group(1)
retryable = set(re.findall(r"\.(\w+)", retry))
rows, doc = [], []
for line in src.splitlines():
    s = line.strip()
    if s.startswith("///"):
        doc.append(s[3:].strip())
    elif m := re.match(r"public static let (\w+) = Code\(rawValue: \"(\w+)\"\)", s):
        text = " ".join(doc) or ""
        rows.append(f"| `{m.group(2)}` | {text}{' *(retryable)*' if m.group(1) in retryable else ''} |")
        doc = []
    elif not s.startswith("//"):
        doc = []
print("| code | meaning |\n|---|---|")
print("\n".join(rows))
