# benches/load_common.sh — shell helpers shared by wrk.sh, duel.sh and bulk_duel.sh
# (sourced, not run).

# Median of the numeric arguments (the lower middle one for an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# User + system CPU time of process $1, in clock ticks (/proc/PID/stat).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# User CPU time of process $1, in clock ticks (/proc/PID/stat).
user_ticks() { awk '{ print $14 }' "/proc/$1/stat"; }

# Waits until process $1 listens on 127.0.0.1 port $2; fails if it exits
# or five seconds pass.
wait_listening() {
    for _ in $(seq 100); do
        kill -0 "$1" 2>/dev/null || return 1
        if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    return 1
}
