#!/usr/bin/env bash
# Model-checks spec/idle.pml, spec/task_state.pml, spec/driver_watch.pml, spec/fork_block.pml and spec/block_in_place.pml with spin.
#
#   bash spec/run.sh            the CI set: 57 jobs, ~160 s CPU, ~80 s wall on 2 cores, <= 2.2 GB each (2026-11-29)
#   SPIN_FULL=1 bash spec/run.sh   also four large runs (~2-3 min more; up to 2.7 GB)
#   SPIN_JOBS=N                 parallel pan runs (default: nproc)
#   SPIN_KEEP=1                 keep the work directory (pan, trails, logs)
#   SPIN=/path/to/spin, CC=cc   the tools (default: spin and gcc from PATH;
#                               ctest passes clang-19, which compiles pan.c faster)
#
# Every job: spin -a (generate pan.c) -> $CC -DSAFETY -> ./pan (exhaustive
# search, stops at the first error). A job is either
#   pass  spin must report "errors: 0" after a complete search, or
#   fail  spin must find an error whose text contains the given string
#         (broken variants, known bugs in src/, vacuity witnesses).
# Exit status: 0 when every job behaves as expected, 1 otherwise, 2 when spin
# or a C compiler is missing.
set -u

SPEC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

SPIN=${SPIN:-spin}
if ! command -v "$SPIN" >/dev/null 2>&1; then
  echo "spec/run.sh: '$SPIN' (the Promela model checker) is not installed; it is a declared dependency (Debian: apt-get install spin)" >&2
  exit 2
fi
CC=${CC:-gcc}
if ! command -v "$CC" >/dev/null 2>&1; then
  echo "spec/run.sh: no C compiler '$CC' (pan is compiled C)" >&2
  exit 2
fi

JOBS=${SPIN_JOBS:-$(nproc 2>/dev/null || echo 2)}
# pan's searches are bound by memory: its state store and hash table, up
# to 2.2 GB a job, take a page fault and a TLB miss every few states. With
# glibc's malloc on transparent huge pages (the kernel's "madvise" mode,
# Debian's default) the CI set took 79 s instead of 115 s on 2 cores, and
# 155 CPU-s instead of 227 (2026-11-29). Where the kernel or glibc lacks
# them, the setting does nothing.
export GLIBC_TUNABLES=${GLIBC_TUNABLES:-glibc.malloc.hugetlb=1}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/aspen-spin.XXXXXX")
if [[ -z ${SPIN_KEEP:-} ]]; then trap 'rm -rf "$WORK"' EXIT; else echo "work directory: $WORK"; fi

# The fixes proposed for the two bugs task_state.pml finds in src/task/task_core.cpp
# (see spec/README.md). The passing task_state runs model the code WITH them;
# the two "bug-*" jobs model the code as it is and must fail.
FIXES=""

# name | pass/fail | model | spin -D defines | cc flags | pan flags | expected error text (fail jobs)
# Largest first: the scheduler below starts jobs in this order.
JOB_LIST=(
  # -- idle protocol (spec/idle.pml) -------------------------------------------------------
  "idle-3w|pass|idle.pml|-DNW=3 -DEXT_ITEMS=1 -DINT_ITEMS=2|-O2 -DCOLLAPSE|-m100000 -w25|"
  # -- task state word (spec/task_state.pml), with the proposed fixes ---------------------
  "task-abort-await|pass|task_state.pml|$FIXES -DSOURCES=2 -DABORTER=1 -DEARLY_AWAITER=0 -DJOIN_AWAIT=1 -DREPOLL=0 -DYIELDS=0|-O0|-m100000 -w23|"
  "task-wake|pass|task_state.pml|$FIXES -DSOURCES=2 -DABORTER=0 -DEARLY_AWAITER=0 -DJOIN_AWAIT=1 -DREPOLL=1 -DSRC1_TWICE=1 -DPOLLERS=2 -DYIELDS=1|-O0|-m100000 -w23|"
  "task-join|pass|task_state.pml|$FIXES -DSOURCES=1 -DABORTER=1 -DEARLY_AWAITER=1 -DJOIN_AWAIT=2 -DREPOLL=1 -DYIELDS=0|-O0|-m100000 -w22|"
  "task-alone-detach|pass|task_state.pml|$FIXES -DSOURCES=2 -DABORTER=0 -DEARLY_AWAITER=0 -DJOIN_AWAIT=0 -DREPOLL=0 -DSRC1_TWICE=1 -DPOLLERS=2 -DYIELDS=1|-O0|-m100000 -w23|"
  "task-abort-detach|pass|task_state.pml|$FIXES -DSOURCES=2 -DABORTER=1 -DEARLY_AWAITER=0 -DJOIN_AWAIT=0 -DYIELDS=0|-O0|-m100000 -w22|"
  "task-inline-wake|pass|task_state.pml|$FIXES -DINLINE=1 -DSOURCES=1 -DABORTER=1 -DEARLY_AWAITER=1 -DJOIN_AWAIT=1 -DREPOLL=1 -DSRC1_TWICE=0 -DPOLLERS=2 -DYIELDS=1|-O0|-m100000 -w22|"
  "task-inline-abort-handle|pass|task_state.pml|$FIXES -DINLINE=1 -DABORTER_OWN_REF -DSOURCES=1 -DABORTER=1 -DEARLY_AWAITER=1 -DJOIN_AWAIT=1 -DREPOLL=1 -DSRC1_TWICE=0 -DPOLLERS=2 -DYIELDS=1|-O0|-m100000 -w22|"
  "task-inline-complete|pass|task_state.pml|$FIXES -DINLINE=1 -DSOURCES=0 -DABORTER=1 -DEARLY_AWAITER=1 -DJOIN_AWAIT=2 -DREPOLL=1 -DPOLLERS=2 -DYIELDS=0|-O0|-m100000 -w22|"
  "idle-2w|pass|idle.pml|-DNW=2 -DEXT_ITEMS=2 -DINT_ITEMS=2|-O0|-m100000|"
  "idle-1w|pass|idle.pml|-DNW=1 -DEXT_ITEMS=2 -DINT_ITEMS=2|-O0|-m100000|"
  "idle-2w-driver|pass|idle.pml|-DNW=2 -DEXT_ITEMS=1 -DINT_ITEMS=2 -DSPONTANEOUS=2|-O0|-m100000|"
  # -- who watches the driver (spec/driver_watch.pml): interest never stranded -------------
  "driver-3w|pass|driver_watch.pml|-DNW=3 -DTASKS=1 -DARMS=1 -DSPAWNS=1|-O0|-m100000|"
  "driver-2w|pass|driver_watch.pml|-DNW=2 -DTASKS=2 -DARMS=3 -DSPAWNS=1 -DSPURIOUS=1|-O0|-m100000|"
  "driver-ok-stale-interest|pass|driver_watch.pml|-DSTALE_INTEREST -DNW=2 -DTASKS=2 -DARMS=3 -DSPAWNS=1|-O0|-m100000|"
  "driver-ok-all-futex|pass|driver_watch.pml|-DALL_FUTEX -DNW=2 -DTASKS=2 -DARMS=3 -DSPAWNS=1|-O0|-m100000|"
  "driver-1w|pass|driver_watch.pml|-DNW=1 -DTASKS=2 -DARMS=3 -DSPAWNS=1|-O0|-m100000|"
  # -- the parallel algorithms' shared block (spec/fork_block.pml) -------------------------
  "fork-3-abort|pass|fork_block.pml|-DROOT_PIECES=3 -DABORT -DSPURIOUS=2|-O0|-m100000|"
  "fork-3|pass|fork_block.pml|-DROOT_PIECES=3|-O0|-m100000|"
  "fork-2-no-spurious|pass|fork_block.pml|-DROOT_PIECES=2 -DSPURIOUS=0 -DABORT|-O0|-m100000|"
  # -- handing a worker back from block_in_place's stand-in (spec/block_in_place.pml) ------
  "bip|pass|block_in_place.pml||-O0|-m100000|"
  "bip-spontaneous-2|pass|block_in_place.pml|-DSPONTANEOUS=2|-O0|-m100000|"
  "bip-no-notifier|pass|block_in_place.pml|-DNO_NOTIFIER|-O0|-m100000|"
  # -- broken variants: the model must catch them ------------------------------------------
  "idle-broken-lone-worker|fail|idle.pml|-DBROKEN_LONE_NOT_SEARCHING -DNW=1 -DEXT_ITEMS=1 -DINT_ITEMS=2|-O0|-m100000|assertion violated (pending==0)"
  "idle-broken-stale-token|fail|idle.pml|-DBROKEN_STALE_TOKEN -DSPONTANEOUS=1 -DNW=2 -DEXT_ITEMS=1 -DINT_ITEMS=1|-O0|-m100000|assertion violated (nsleep<2)"
  "idle-broken-no-recheck|fail|idle.pml|-DBROKEN_NO_RECHECK -DNW=3 -DEXT_ITEMS=1 -DINT_ITEMS=0|-O0|-m100000|assertion violated (pending==0)"
  "driver-broken-no-interest|fail|driver_watch.pml|-DBROKEN_NO_INTEREST -DNW=2|-O0|-m100000|assertion violated ((timers+ios)==0)"
  "driver-broken-timers-only|fail|driver_watch.pml|-DBROKEN_TIMERS_ONLY -DNW=2|-O0|-m100000|assertion violated ((timers+ios)==0)"
  "driver-broken-unpark-self|fail|driver_watch.pml|-DBROKEN_NO_UNPARK_SELF -DNW=2|-O0|-m100000|assertion violated (pending==0)"
  "fork-broken-last-one-step|fail|fork_block.pml|-DBROKEN_LAST_ONE_STEP|-O0|-m100000|assertion violated  !(deleted)"
  "fork-broken-waker-late|fail|fork_block.pml|-DBROKEN_WAKER_LATE -DSPURIOUS=0|-O0|-m100000|invalid end state"
  "fork-broken-root-deletes|fail|fork_block.pml|-DBROKEN_ROOT_DELETES|-O0|-m100000|assertion violated  !(deleted)"
  "bip-broken-no-recheck|fail|block_in_place.pml|-DBROKEN_NO_RECHECK|-O0|-m100000|invalid end state"
  # -- vacuity witnesses: these paths must be reachable ------------------------------------
  "bip-witness-recheck|fail|block_in_place.pml|-DWITNESS|-O0|-m100000|assertion violated (7!=7)"
  "fork-witness-woken|fail|fork_block.pml|-DWITNESS=1|-O0|-m100000|assertion violated  !(done)"
  "idle-witness-chain-wake|fail|idle.pml|-DWITNESS=W_CHAIN|-O0|-m100000|assertion violated (4!=4)"
  "idle-witness-recheck-wake|fail|idle.pml|-DWITNESS=W_RECHECK|-O0|-m100000|assertion violated (5!=5)"
  "driver-witness-park|fail|driver_watch.pml|-DWITNESS=W_PARK_DELIVER -DNW=2|-O0|-m100000|assertion violated (1!=1)"
  "driver-witness-poll|fail|driver_watch.pml|-DWITNESS=W_POLL_DELIVER -DNW=2|-O0|-m100000|assertion violated (2!=2)"
  "driver-witness-busy-holder|fail|driver_watch.pml|-DWITNESS=W_BUSY_HOLDER -DNW=2|-O0|-m100000|assertion violated (3!=3)"
  "driver-witness-rule-futex|fail|driver_watch.pml|-DWITNESS=W_RULE_FUTEX -DNW=2|-O0|-m100000|assertion violated (4!=4)"
  "task-witness-join-wake|fail|task_state.pml|$FIXES -DWITNESS=W_JOIN_WAKE|-O0|-m100000|assertion violated (1!=1)"
  "task-witness-abort-idle|fail|task_state.pml|$FIXES -DWITNESS=W_ABORT_IDLE|-O0|-m100000|assertion violated (2!=2)"
  "task-witness-requeue|fail|task_state.pml|$FIXES -DWITNESS=W_REQUEUE|-O0|-m100000|assertion violated (3!=3)"
  "task-witness-inline-excl|fail|task_state.pml|$FIXES -DINLINE=1 -DSOURCES=0 -DWITNESS=W_INLINE_EXCL|-O0|-m100000|assertion violated (4!=4)"
  "task-witness-inline-req|fail|task_state.pml|$FIXES -DINLINE=1 -DSOURCES=1 -DWITNESS=W_INLINE_REQ|-O0|-m100000|assertion violated (5!=5)"
  "task-witness-alone-start|fail|task_state.pml|$FIXES -DSOURCES=1 -DABORTER=0 -DJOIN_AWAIT=0 -DWITNESS=W_ALONE_START|-O0|-m100000|assertion violated (6!=6)"
  "task-witness-alone-end|fail|task_state.pml|$FIXES -DSOURCES=1 -DABORTER=0 -DJOIN_AWAIT=0 -DWITNESS=W_ALONE_END|-O0|-m100000|assertion violated (7!=7)"
  "task-witness-given-back|fail|task_state.pml|$FIXES -DINLINE=1 -DSOURCES=0 -DWITNESS=W_GIVEN_BACK|-O0|-m100000|assertion violated (8!=8)"
  "task-broken-alone-any|fail|task_state.pml|-DBROKEN_ALONE_ANY -DSOURCES=2 -DABORTER=0 -DEARLY_AWAITER=0 -DJOIN_AWAIT=0 -DPOLLERS=1 -DYIELDS=1|-O0|-m100000|assertion violated"
  "task-broken-excl-store|fail|task_state.pml|-DBROKEN_EXCL_ANY -DINLINE=1 -DSOURCES=0 -DABORTER=0 -DEARLY_AWAITER=1 -DJOIN_AWAIT=1 -DREPOLL=0 -DYIELDS=0|-O0|-m100000|assertion violated"
  "task-broken-settle|fail|task_state.pml|-DBROKEN_SETTLE -DINLINE=1 -DSOURCES=1 -DABORTER=0 -DEARLY_AWAITER=0 -DJOIN_AWAIT=1 -DREPOLL=0 -DPOLLERS=1 -DYIELDS=1|-O0|-m100000|assertion violated"
  "task-broken-detach-any|fail|task_state.pml|$FIXES -DBROKEN_DETACH_ANY -DSOURCES=2 -DABORTER=1 -DEARLY_AWAITER=0 -DJOIN_AWAIT=0 -DYIELDS=0|-O0|-m100000|assertion violated"
  "task-broken-no-abort-wait|fail|task_state.pml|$FIXES -DBROKEN_NO_ABORT_WAIT -DINLINE=1 -DSOURCES=0|-O0|-m100000|assertion violated (freed==0)"
  "task-broken-drop-fast|fail|task_state.pml|-DBROKEN_DROP_FAST -DSOURCES=1 -DABORTER=0 -DEARLY_AWAITER=0 -DJOIN_AWAIT=1 -DREPOLL=0 -DYIELDS=0|-O0|-m100000|assertion violated"
  # -- two bugs spin found in src/task/task_core.cpp (fixed there); with the old code restored
  #    spin must still find them, so the model keeps its teeth -----------------------------
  "task-bug-drop-join-uaf|fail|task_state.pml|-DOLD_BUG_DROP_JOIN -DSOURCES=2 -DABORTER=1 -DEARLY_AWAITER=0 -DJOIN_AWAIT=0 -DYIELDS=0|-O0|-m100000|assertion violated (freed==0)"
  "task-bug-will-wake-race|fail|task_state.pml|-DOLD_BUG_WILL_WAKE -DSOURCES=1 -DABORTER=0 -DEARLY_AWAITER=1 -DJOIN_AWAIT=1|-O0|-m100000|assertion violated  !(jw_busy)"
)
if [[ -n ${SPIN_FULL:-} ]]; then
  JOB_LIST=(
    "full-task-all-actors|pass|task_state.pml|$FIXES -DSOURCES=2 -DABORTER=1 -DEARLY_AWAITER=1 -DJOIN_AWAIT=2 -DREPOLL=1 -DYIELDS=0|-O2 -DCOLLAPSE|-m100000 -w26|"
    "full-idle-3w-driver|pass|idle.pml|-DNW=3 -DEXT_ITEMS=1 -DINT_ITEMS=1 -DSPONTANEOUS=1|-O2 -DCOLLAPSE|-m100000 -w24|"
    "full-idle-3w-4items|pass|idle.pml|-DNW=3 -DEXT_ITEMS=2 -DINT_ITEMS=2|-O2 -DCOLLAPSE|-m100000 -w26|"
    "full-driver-3w-spurious|pass|driver_watch.pml|-DNW=3 -DTASKS=1 -DARMS=2 -DSPAWNS=1 -DSPURIOUS=1|-O2 -DCOLLAPSE|-m100000 -w25|"
    "${JOB_LIST[@]}"
  )
fi

# run_job <index> <spec>: writes $WORK/<name>/{log,result}
run_job() {
  local spec=$2 name expect model defs ccflags panflags want
  IFS='|' read -r name expect model defs ccflags panflags want <<<"$spec"
  local dir=$WORK/$name
  mkdir -p "$dir"
  local start=$SECONDS
  (
    cd "$dir" || exit 3
    # a private copy (with the file the models include): pan names its trail
    # file after the model it was made from
    cp "$SPEC_DIR/$model" "$SPEC_DIR/idle_notify.pml" . || exit 3
    # shellcheck disable=SC2086
    "$SPIN" -a $defs "$model" >spin.out 2>&1 || { cat spin.out; exit 3; }
    # shellcheck disable=SC2086
    "$CC" $ccflags -DSAFETY -DMEMLIM=6144 -w -o pan pan.c >cc.out 2>&1 || { cat cc.out; exit 3; }
    # shellcheck disable=SC2086
    ./pan $panflags >pan.out 2>&1
    exit 0
  ) >"$dir/log" 2>&1
  local rc=$?
  local secs=$((SECONDS - start))
  local out=$dir/pan.out verdict detail errors states depth
  errors=$(grep -o 'errors: [0-9]*' "$out" 2>/dev/null | head -1 | grep -o '[0-9]*$')
  states=$(awk '/states, stored/ {print $1; exit}' "$out" 2>/dev/null)
  depth=$(grep -o 'depth reached [0-9]*' "$out" 2>/dev/null | head -1 | grep -o '[0-9]*$')
  if [[ $rc -ne 0 || -z $errors ]]; then
    verdict=FAIL; detail="spin/gcc/pan did not run to the end: $(tail -3 "$dir/log" "$out" 2>/dev/null | tr '\n' ' ')"
  elif grep -qE 'max search depth too small|reached -DMEMLIM bound|out of memory' "$out"; then
    verdict=FAIL; detail="search incomplete: $(grep -E 'max search depth too small|MEMLIM|out of memory' "$out" | head -1)"
  elif [[ $expect == pass ]]; then
    if [[ $errors == 0 ]]; then verdict=ok; detail="";
    else verdict=FAIL; detail="unexpected: $(grep -m1 -E '^pan:[0-9]+:|violated|invalid end state' "$out")"; fi
  else
    if [[ $errors != 0 ]] && grep -qF -- "$want" "$out"; then
      verdict=ok; detail="found as expected: $(grep -m1 -E '^pan:[0-9]+:' "$out")"
    elif [[ $errors != 0 ]]; then
      verdict=FAIL; detail="found a different error: $(grep -m1 -E '^pan:[0-9]+:|violated|invalid end state' "$out")"
    else
      verdict=FAIL; detail="spin did NOT find the expected error ($want): the model no longer catches it"
    fi
  fi
  printf '%s|%s|%s|%s|%s|%s|%s\n' "$verdict" "$name" "$expect" "${errors:-?}" "${states:-?}" "${depth:-?}" "${secs}s $detail" >"$dir/result"
}

echo "spin: $("$SPIN" -V 2>&1 | head -1); $JOBS parallel jobs; ${#JOB_LIST[@]} jobs"
T0=$SECONDS
i=0
for spec in "${JOB_LIST[@]}"; do
  while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n; done
  run_job "$i" "$spec" &
  i=$((i + 1))
done
wait

status=0
printf '%-26s %-6s %-4s %-7s %12s %6s  %s\n' job result want errors "states" depth "time / detail"
for spec in "${JOB_LIST[@]}"; do
  name=${spec%%|*}
  r=$WORK/$name/result
  if [[ ! -f $r ]]; then
    echo "$name: no result"; status=1; continue
  fi
  IFS='|' read -r verdict n expect errors states depth rest <"$r"
  printf '%-26s %-6s %-4s %-7s %12s %6s  %s\n' "$n" "$verdict" "$expect" "$errors" "$states" "$depth" "$rest"
  if [[ $verdict != ok ]]; then
    status=1
    echo "---- $n: pan output (tail) ----"
    tail -25 "$WORK/$n/pan.out" 2>/dev/null || cat "$WORK/$n/log"
    if [[ $expect == pass && -f $WORK/$n/pan.out ]] && ls "$WORK/$n"/*.trail >/dev/null 2>&1; then
      echo "---- $n: counterexample (spin -t, last steps) ----"
      IFS='|' read -r _ _ model defs _ <<<"$spec"
      # shellcheck disable=SC2086
      (cd "$WORK/$n" && "$SPIN" -t -p $defs "$model" 2>&1 | grep -E '^ *[0-9]+:|Error|failed assertion' | tail -40)
    fi
  fi
done
echo "total wall time: $((SECONDS - T0))s"
if [[ $status -ne 0 ]]; then
  echo "spec/run.sh: FAILED (see above)"
else
  echo "spec/run.sh: all models behave as expected"
fi
exit $status
