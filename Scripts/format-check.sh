#!/usr/bin/env bash
# Style check with the committed .swift-format (`swift format lint --strict`): any rule finding, or
# trailing whitespace, fails. Not enforced: the pretty printer's layout findings (AddLines,
# Indentation, LineLength, Spacing, RemoveLine, TrailingComma), because the tree is aligned by hand
# (continuations under the opening parenthesis, tables in columns) and passing them means
# reformatting every file, not linting it. Rules switched off in .swift-format and why: README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
swift format --version >/dev/null 2>&1 || { echo "format: this toolchain has no swift format"; exit 1; }
layout='\[(AddLines|Indentation|LineLength|Spacing|RemoveLine|TrailingComma)\]'
findings=$(swift format lint --strict --configuration .swift-format --recursive Sources Tests Fuzz Package.swift 2>&1 \
    | grep -vE "$layout" || true)
if [ -n "$findings" ]; then
    echo "$findings"
    echo "format: the findings above break .swift-format's rules"
    exit 1
fi
echo "format: no finding (.swift-format)"
