# Sourced by the CI scripts: installs the tools a script needs.
#
# need_tools COMMAND[:PACKAGE]...  installs, with apt-get, the package of
# each command that is not on PATH (the package is the command's name
# unless given). The package lists are updated only if the install fails
# without it, which keeps a run on a machine with fresh lists short.
need_tools() {
    local missing=() spec
    for spec in "$@"; do
        command -v "${spec%%:*}" >/dev/null 2>&1 || missing+=("${spec#*:}")
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    echo "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; then
        apt-get update -qq
        apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

# need_pip MODULE[:PACKAGE]...  installs, with pip, the PyPI package of
# each Python module that python3 cannot import (the package is the
# module's name unless given).
need_pip() {
    local missing=() spec
    for spec in "$@"; do
        python3 -c "import ${spec%%:*}" >/dev/null 2>&1 || missing+=("${spec#*:}")
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    echo "installing (pip) ${missing[*]}"
    # A distribution's own Python refuses installs outside a venv (PEP 668).
    python3 -m pip install -q --root-user-action=ignore "${missing[@]}" ||
        python3 -m pip install -q --root-user-action=ignore --break-system-packages "${missing[@]}"
}
