#!/usr/bin/env bash
# The framework's layers only call down: no module under op/, buf/,
# executor/, time/ or driver/ may name core/ or server/ (the per-core loop
# and the server sit above them). Checked from each file's `crate::` and
# `super::` paths, comments excluded.
set -euo pipefail
cd "$(dirname "$0")/../framework/src"

status=0
for layer in op buf executor time driver; do
    while IFS= read -r hit; do
        echo "layers: $hit" >&2
        status=1
    done < <(grep -rnE '(crate|super::super)::(core|server|runtime)\b' "$layer" --include='*.rs' |
        grep -vE '^[^:]+:[0-9]+:\s*//' || true)
done
if [[ $status -ne 0 ]]; then
    echo "layers: a lower layer names core/, server/ or runtime/ (see above)" >&2
else
    echo "layers: op/, buf/, executor/, time/ and driver/ name neither core/, server/ nor runtime/"
fi
exit $status
