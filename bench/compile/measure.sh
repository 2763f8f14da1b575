#!/usr/bin/env bash
# Compile time of user code: builds bench/compile/triage.cpp (a one-file user graph written from
# README.md) against SRC_TREE's headers, the way a separate CMake project would, and prints one
# table: -O0 and -O2 compiles, -fsyntax-only, and the time to report the type error in
# type_error.cpp. Each row is measured RUNS times (default 3), sequentially; the median is shown.
#
#   bench/compile/measure.sh SRC_TREE [BUILD_TREE]
#
# SRC_TREE    a stategraph checkout (its graph/, checkpoint/, dsl/ and, if present, core/ headers)
# BUILD_TREE  optional: a build directory of SRC_TREE with its libraries built; the -O2 object is
#             then linked against every libstategraph*.a found there and run once.
# Env: CXX (default g++; the real compiler is called, never ccache), RUNS (default 3),
#      EXTRA_FLAGS (appended to every compile, e.g. "-DNDEBUG").
set -euo pipefail

usage() { echo "usage: $0 SRC_TREE [BUILD_TREE]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src_tree=$(cd "$1" && pwd)
build_tree=""
if [[ $# -eq 2 ]]; then build_tree=$(cd "$2" && pwd); fi
runs=${RUNS:-3}
triage="$here/triage.cpp"
type_error="$here/type_error.cpp"
floor="$here/floor.cpp"
[[ -f $triage && -f $type_error ]] || { echo "missing $triage or $type_error" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 2; }

# The real compiler, not a ccache wrapper (a cache hit would measure nothing).
export CCACHE_DISABLE=1
cxx=$(readlink -f "$(command -v "${CXX:-g++}")")
case "$(basename "$cxx")" in
    *ccache*) echo "$cxx is ccache; set CXX to the real compiler" >&2; exit 2 ;;
esac

includes=()
for d in core graph checkpoint dsl; do
    [[ -d $src_tree/$d/include ]] && includes+=("-I$src_tree/$d/include")
done
[[ ${#includes[@]} -ge 3 ]] || { echo "$src_tree does not look like a stategraph tree (no graph/checkpoint/dsl includes)" >&2; exit 2; }
read -r -a extra <<<"${EXTRA_FLAGS:-}"
flags=(-std=c++20 "${includes[@]}" "${extra[@]}")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }

# median of the numbers given as arguments
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {m=int((NR+1)/2); if (NR%2) print v[m]; else printf "%.2f\n", (v[m]+v[m+1])/2}'; }

rows=()
# measure LABEL EXPECT(ok|fail) g++-args...: RUNS sequential runs under /usr/bin/time.
measure() {
    local label=$1 expect=$2; shift 2
    local walls=() users=() rss=() load_before i rc
    load_before=$(load)
    for ((i = 1; i <= runs; i++)); do
        rc=0
        /usr/bin/time -f '%e %U %M' -o "$work/time" "$cxx" "$@" >"$work/out" 2>&1 || rc=$?
        if [[ $expect == ok && $rc -ne 0 ]]; then
            echo "FAILED: $label (exit $rc)" >&2; head -40 "$work/out" >&2; exit 1
        fi
        if [[ $expect == fail ]] && ! grep -q 'error:' "$work/out"; then
            echo "NO ERROR REPORTED: $label (exit $rc): type_error.cpp compiled cleanly" >&2; exit 1
        fi
        # the last line of the time file holds the figures ("Command exited with non-zero status" may precede it)
        read -r w u m < <(tail -n1 "$work/time")
        walls+=("$w"); users+=("$u"); rss+=("$m")
    done
    local mu mw mm
    mu=$(median "${users[@]}"); mw=$(median "${walls[@]}"); mm=$(median "${rss[@]}")
    rows+=("$(printf '| %-36s | %8.2f | %8.2f | %8.0f | %-20s | %-16s |' \
        "$label" "$mu" "$mw" "$(awk -v m="$mm" 'BEGIN { printf "%d", m / 1024 }')" "$(IFS=/; echo "${users[*]}")" "$load_before")")
    if [[ $expect == fail ]]; then
        first_error=$(grep -m1 'error:' "$work/out" | cut -c1-220)
        error_lines=$(wc -l <"$work/out")
    fi
}

# measure_shown LABEL g++-args...: the wall time from starting the compiler to the first "error:"
# line on its output (what a user waits for before reading the error; GCC goes on compiling the
# rest of the file after it). RUNS sequential runs; the median is shown in the wall column.
measure_shown() {
    local label=$1; shift
    local walls=() load_before i start shown
    load_before=$(load)
    for ((i = 1; i <= runs; i++)); do
        start=$(date +%s%N)
        { "$cxx" "$@" 2>&1 || true; } | { grep -m1 -q 'error:' && date +%s%N >"$work/shown"; cat >/dev/null; }
        [[ -s $work/shown ]] || { echo "NO ERROR REPORTED: $label" >&2; exit 1; }
        shown=$(cat "$work/shown"); rm -f "$work/shown"
        walls+=("$(awk -v a="$start" -v b="$shown" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')")
    done
    rows+=("$(printf '| %-36s | %8s | %8.2f | %8s | %-20s | %-16s |' \
        "$label" "-" "$(median "${walls[@]}")" "-" "$(IFS=/; echo "${walls[*]}") wall" "$load_before")")
}

commit=$(git -C "$src_tree" rev-parse --short HEAD 2>/dev/null || echo "not a git tree")
dirty=$(git -C "$src_tree" status --porcelain --untracked-files=no 2>/dev/null | head -c1 || true)

echo "stategraph user-code compile time ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo "source tree : $src_tree (commit $commit${dirty:+, with uncommitted changes})"
echo "input       : bench/compile/triage.cpp ($(wc -l <"$triage") lines), type_error.cpp"
echo "compiler    : $cxx -- $("$cxx" --version | head -n1)"
echo "flags       : ${flags[*]}"
echo "machine     : nproc $(nproc), load average at start $(load), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM"
echo "runs        : $runs per row, sequential, median shown; user CPU is the primary figure (the machine is shared)"
echo

measure "-O0 compile (-c)" ok -O0 -c "$triage" -o "$work/triage_O0.o" "${flags[@]}"
measure "-O2 compile (-c)" ok -O2 -c "$triage" -o "$work/triage_O2.o" "${flags[@]}"
measure "-fsyntax-only triage.cpp" ok -fsyntax-only "$triage" "${flags[@]}"
measure "-fsyntax-only type_error.cpp (error)" fail -fsyntax-only "$type_error" "${flags[@]}"
# The floor: the same kind of user code with no stategraph in it (Asio coroutines, a described
# struct to and from JSON): what an -O2 compile costs before any graph library.
measure_shown "type error shown (-O2 -c)" -O2 -c "$type_error" -o "$work/type_error.o" "${flags[@]}"
measure "floor.cpp -O2 (no stategraph)" ok -O2 -c "$floor" -o "$work/floor_O2.o" "${flags[@]}"

# The same with the precompiled header the package exports (stategraph::stategraph gives a
# consumer's target <stategraph/dsl/precompiled.hpp> precompiled with its flags, as here): built
# once, then each compile starts from it. -Winvalid-pch: a header GCC could not use fails the row.
pch_header="$src_tree/dsl/include/stategraph/dsl/precompiled.hpp"
if [[ -f $pch_header ]]; then
    mkdir -p "$work/pch"
    echo '#include <stategraph/dsl/precompiled.hpp>' >"$work/pch/stategraph_pch.hpp"
    pch=(-Winvalid-pch -I"$work/pch" -include stategraph_pch.hpp)
    measure "precompiled header (-O2, once)" ok -O2 -x c++-header "$work/pch/stategraph_pch.hpp" \
        -o "$work/pch/stategraph_pch.hpp.gch" "${flags[@]}"
    measure "-O2 compile (-c), precompiled" ok -O2 -c "$triage" -o "$work/triage_O2_pch.o" "${flags[@]}" "${pch[@]}"
    measure "floor.cpp -O2, precompiled" ok -O2 -c "$floor" -o "$work/floor_O2_pch.o" "${flags[@]}" "${pch[@]}"
    measure "-O2 -c type_error.cpp, precompiled" fail -O2 -c "$type_error" -o "$work/type_error.o" "${flags[@]}" "${pch[@]}"
    measure "-fsyntax-only type_error, precompiled" fail -O2 -fsyntax-only "$type_error" "${flags[@]}" "${pch[@]}"
    measure_shown "type error shown (-O2 -c, precompiled)" -O2 -c "$type_error" -o "$work/type_error.o" "${flags[@]}" "${pch[@]}"
    if grep -q 'not using\|invalid' "$work/out"; then
        echo "the precompiled header was not used:" >&2; head -5 "$work/out" >&2; exit 1
    fi
fi

printf '| %-36s | %8s | %8s | %8s | %-20s | %-16s |\n' "step" "user s" "wall s" "RSS MB" "user s, each run" "load before"
printf '| %-36s | %8s | %8s | %8s | %-20s | %-16s |\n' "------------------------------------" "-------:" "-------:" "-------:" "--------------------" "----------------"
printf '%s\n' "${rows[@]}"
echo
echo "load average at end: $(load)"
echo "object size: -O0 $(( $(stat -c %s "$work/triage_O0.o") / 1024 )) KiB, -O2 $(( $(stat -c %s "$work/triage_O2.o") / 1024 )) KiB"
# Machine code generated at -O2 (the .text of size(1)): steadier than seconds on a shared machine.
echo "-O2 code (.text): triage.cpp $(size "$work/triage_O2.o" | awk 'NR==2 {print $1}') bytes, floor.cpp $(size "$work/floor_O2.o" | awk 'NR==2 {print $1}') bytes"
echo "type error reported as ($error_lines lines of diagnostics): $first_error"

if [[ -n $build_tree ]]; then
    mapfile -t libs < <(find "$build_tree" -name 'libstategraph*.a' | sort)
    [[ ${#libs[@]} -gt 0 ]] || { echo "no libstategraph*.a under $build_tree" >&2; exit 1; }
    link_start=$(date +%s.%N)
    "$cxx" "$work/triage_O2.o" -o "$work/triage" -Wl,--start-group "${libs[@]}" -Wl,--end-group \
        -Wl,--as-needed -lboost_json -lsqlite3 -lssl -lcrypto -pthread
    link_s=$(awk -v a="$link_start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
    echo
    echo "run (-O2 object linked against $(printf '%s ' "${libs[@]##*/}")in ${link_s}s wall):"
    if "$work/triage" >"$work/run_out" 2>&1; then
        sed 's/^/  /' "$work/run_out"; echo "run: ok"
    else
        sed 's/^/  /' "$work/run_out"; echo "run: FAILED"; exit 1
    fi
fi
