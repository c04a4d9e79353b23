// A trial command that reports a learning curve and checkpoints the way hyperpack-trainer does:
// the epoch saved before its line is printed, HYPERPACK_RESUME and HYPERPACK_STOP_AT honoured.
//
//   sh curve.sh X [no|warm]   loss = X + 1/epoch for epochs 1..9, so trials rank by X at every
//                        rung; `no`: it writes no checkpoint (and so cannot pause); `warm`: at
//                        HYPERPACK_STOP_AT it reads its control socket (HYPERPACK_CONTROL_FD) and
//                        goes on to N when told "continue N", as hyperpack-trainer does.
// Each start appends "TRIAL FIRST_EPOCH STOP_AT AGENT" (none / local when unset) to `starts` next
// to the script. Trial 3 blocks while a file `block` exists there, after writing "3" to the FIFO
// `fifo`, so that a test can kill its runner mid-study.
#pragma once

namespace hyperpack::testing {

constexpr char kCurveScript[] = R"(#!/bin/sh
dir=$(dirname "$0")
ck="$HYPERPACK_CHECKPOINT_DIR/state"
e=0
if [ "$HYPERPACK_RESUME" = 1 ] && [ -f "$ck" ]; then e=$(cat "$ck"); fi
echo "$HYPERPACK_TRIAL_ID $((e + 1)) ${HYPERPACK_STOP_AT:-none} ${HYPERPACK_AGENT:-local}" >> "$dir/starts"
if [ "$HYPERPACK_TRIAL_ID" = 3 ] && [ -e "$dir/block" ]; then
  echo 3 > "$dir/fifo"
  exec sleep 600
fi
while [ $e -lt 9 ]; do
  e=$((e + 1))
  if [ "$2" != no ]; then mkdir -p "$HYPERPACK_CHECKPOINT_DIR"; echo $e > "$ck"; fi
  echo "{\"epoch\": $e, \"loss\": $(awk "BEGIN { print $1 + 1 / $e }")}"
  if [ -n "$HYPERPACK_STOP_AT" ] && [ $e -ge "$HYPERPACK_STOP_AT" ]; then
    [ "$2" = warm ] && [ "$HYPERPACK_CONTROL_FD" = 3 ] || exit 0
    read -r cmd next <&3 || exit 0
    [ "$cmd" = continue ] || exit 0
    HYPERPACK_STOP_AT=$next
  fi
done
)";

}  // namespace hyperpack::testing
