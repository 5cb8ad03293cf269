#!/usr/bin/env bash
# The framework's layers only call down. Every top-level module of
# framework/src has a rank (the list below, lowest first); a module may
# name its own rank or lower ones, never a higher one. Checked on each
# file's `crate::` paths, comments excluded. A name the crate root
# re-exports (`crate::spawn_local`, `crate::Backend`) counts as the module
# it comes from: lib.rs's `pub use` lines say which.
#
# Not seen: `super::` paths (they stay inside a module), a path split
# over several lines, and unit tests (`tests.rs` files).
set -euo pipefail
cd "$(dirname "$0")/../framework/src"

# Lowest first; modules on one line share a rank.
ranks=(
    "sys slab unwind current histogram future backend stats main_error"
    "sync"
    "driver"
    "executor"
    "time"
    "buf"
    "op"
    "fs"
    "net"
    "tls"
    "handler"
    "core"
    "server"
    "runtime"
)

declare -A rank
for i in "${!ranks[@]}"; do
    for module in ${ranks[$i]}; do
        rank[$module]=$i
    done
done

# Every top-level module must have a rank: a new one is placed on purpose.
status=0
for path in *.rs */; do
    module=${path%.rs}
    module=${module%/}
    [[ $module == lib ]] && continue
    if [[ -z ${rank[$module]+x} ]]; then
        echo "layers: framework/src/$path has no rank in .ci/layers.sh" >&2
        status=1
    fi
done

# The crate root's re-exports, `name module` per line: lib.rs's
# `pub use module::...::{a, b};` items, flattened.
reexports=$(tr '\n' ' ' <lib.rs | grep -oE 'pub use [a-z_]+(::[a-z_]+)*(::\{[^}]*\}|::[A-Za-z_]+)' |
    sed -E 's/^pub use ([a-z_]+)(::[a-z_]+)*::\{?([^}]*)\}?$/\1 \3/' |
    while read -r module names; do
        for name in ${names//,/ }; do
            echo "$name $module"
        done
    done)
declare -A exported_by
while read -r name module; do
    [[ -n $name ]] && exported_by[$name]=$module
done <<<"$reexports"

# The module a path after `crate::` names: its first segment, or, for a
# re-exported name, where it comes from.
target_of() {
    local first=$1
    if [[ -n ${exported_by[$first]+x} ]]; then
        echo "${exported_by[$first]}"
    else
        echo "$first"
    fi
}

for module in "${!rank[@]}"; do
    if [[ -d $module ]]; then
        # Unit tests (`tests.rs`) may reach any layer to set up a case.
        files=$(find "$module" -name '*.rs' ! -name tests.rs | sort)
    elif [[ -f $module.rs ]]; then
        files=$module.rs
    else
        continue
    fi
    own=${rank[$module]}
    # `crate::a`, and each item of `crate::{a, b::c}` on the same line.
    while IFS=: read -r file line text; do
        names=$(grep -oE 'crate::(\{[^}]*\}?|[A-Za-z_]+)' <<<"$text" |
            sed -E 's/^crate:://; s/[{}]//g; s/,/ /g' |
            tr ' ' '\n' | sed -E 's/::.*//' | grep -vE '^(self|)$' || true)
        for name in $names; do
            target=$(target_of "$name")
            [[ -z ${rank[$target]+x} ]] && continue
            if ((rank[$target] > own)); then
                echo "layers: $file:$line: $module calls up into $target (crate::$name)" >&2
                status=1
            fi
        done
    done < <(grep -nE 'crate::' $files /dev/null | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
done

if [[ $status -ne 0 ]]; then
    echo "layers: a module names one above it (see above)" >&2
else
    echo "layers: every module of framework/src names only its own rank or lower ones"
fi
exit $status
