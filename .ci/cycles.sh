#!/usr/bin/env bash
# No two files of a crate import each other in a circle: each file's
# `use crate::..`, `super::..` and child-module paths, comments excluded,
# followed through re-exports to the file that defines what they name
# (.ci/cycles.py; its ALLOWED list holds the known circles it lets pass).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 .ci/cycles.py handlers framework
