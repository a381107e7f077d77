#!/usr/bin/env bash
# tests/train/dry_run.sh — `tessera train --dry-run` (docs/train.md "Dry run") against the
# run itself: its effective config is byte for byte the RUN/config.ini the real run
# writes, its memory figures the real run's log line, its first batches' clips, tokens,
# plan and predicted step times those of the real run's metrics (fresh, and of a resume
# from the run alone); it exits 0 and writes nothing (no RUN made; a resumed RUN's files
# untouched; at 2 ranks under mpirun too); it fails with the real start's errors, byte
# for byte.
source "$(dirname "$0")/lib.sh"
need_store
R=(--config "$CONF" --data "$STORE" "${SMALL[@]}")
# batches FILE: "step clips tokens plan predicted" of the dry run's batch lines
batches() {
  sed -n 's/^step \([0-9]*\): \([0-9]*\) clips, \([0-9]*\) tokens .*; plan \([a-z-]*\): .*; predicted \([0-9.]*\) s .*/\1 \2 \3 \4 \5/p' "$1"
}
# metrics RUN FIRST LAST: the same of the real run's steps FIRST..LAST
metrics() {
  jq -r "select(.step >= $2 and .step <= $3) | \"\\(.step) \\(.clips) \\(.tokens) \\(.plan) \\(.predicted_s)\"" "$1/metrics.jsonl" |
    awk '{printf "%s %s %s %s %.4f\n", $1, $2, $3, $4, $5}'
}
$T train "${R[@]}" --out "$W/d" --steps 6 --dry-run >"$W/d.out" 2>"$W/d.err" ||
  { cat "$W/d.err"; fail "dry run: exit $?"; }
[ ! -e "$W/d" ] || fail "the dry run made RUN: $(ls "$W/d")"
# --precision P (sample's flag, also train's) is --set train.precision=P: the same dry run
# (--mem-bytes: the host's free memory moves between the two runs, and the output shows it)
P=("${R[@]}" --out "$W/p" --steps 6 --mem-bytes $((8 << 30)) --dry-run)
$T train "${P[@]}" --precision bf16 >"$W/p1.out" 2>/dev/null || fail "dry run with --precision bf16"
$T train "${P[@]}" --set train.precision=bf16 >"$W/p2.out" 2>/dev/null || fail "dry run with --set train.precision=bf16"
cmp -s "$W/p1.out" "$W/p2.out" && grep -qx "precision = bf16" "$W/p1.out" ||
  { diff "$W/p1.out" "$W/p2.out" | head; fail "--precision bf16 is not --set train.precision=bf16"; }
$T train "${R[@]}" --out "$W/d" --steps 6 2>"$W/d.log"
# the config: what the real run wrote, between the dry run's two header lines and "# The run"
sed -n '3,/^# The run$/p' "$W/d.out" | sed '$d' | sed '$d' >"$W/d.cfg"
cmp "$W/d.cfg" "$W/d/config.ini" || { diff "$W/d.cfg" "$W/d/config.ini" | head; fail "the dry run's config is not RUN/config.ini"; }
# the memory model: the real run's figures
mem=$(sed -n 's/^train: memory per rank (model): \(.*\); of .*/\1/p' "$W/d/train.log")
[ -n "$mem" ] && grep -qF "(train.mem_tokens): $mem; of " "$W/d.out" ||
  fail "memory figures: '$mem' not in the dry run's: $(grep '^memory' "$W/d.out")"
# the plans of steps 1-3
diff <(batches "$W/d.out") <(metrics "$W/d" 1 3) || fail "the dry run's batches are not the run's"
[ "$(batches "$W/d.out" | wc -l)" -eq 3 ] || fail "the dry run showed $(batches "$W/d.out" | wc -l) batches"
grep -q "^predicted step time [0-9.]* s (the mean of these 3 batches); the 6 steps to go" "$W/d.out" ||
  fail "no predicted step time: $(tail -1 "$W/d.out")"
# a resume from the run alone: steps 7-9, nothing in RUN changed
cp "$W/d/config.ini" "$W/cfg.before"
logsize=$(wc -c <"$W/d/train.log")
$T train --resume "$W/d" --steps 9 --dry-run >"$W/r.out" 2>"$W/r.err" || { cat "$W/r.err"; fail "dry run of a resume"; }
cmp "$W/cfg.before" "$W/d/config.ini" || fail "the dry run rewrote config.ini"
[ "$(wc -c <"$W/d/train.log")" -eq "$logsize" ] || fail "the dry run wrote train.log"
[ ! -f "$W/d/ckpt-7.safetensors" ] || fail "the dry run trained"
$T train --resume "$W/d" --steps 9 2>>"$W/log"
diff <(batches "$W/r.out") <(metrics "$W/d" 7 9) || fail "the resumed dry run's batches are not the resume's"
# 2 ranks (mpirun): the start's collectives run, rank 0 prints the 2-rank plans (CP groups)
MPI=(mpirun --oversubscribe -np 2)
R2=("${R[@]}" --set train.mem_tokens=256)
"${MPI[@]}" $T train "${R2[@]}" --out "$W/m" --steps 3 --dry-run >"$W/m.out" 2>"$W/m.err" ||
  { tail -5 "$W/m.err"; fail "2-rank dry run"; }
[ ! -e "$W/m" ] || fail "the 2-rank dry run made RUN"
grep -q "; 2 ranks, cost model" "$W/m.out" || fail "the 2-rank dry run planned for $(grep -o '[0-9]* ranks\?,' "$W/m.out")"
"${MPI[@]}" $T train "${R2[@]}" --out "$W/m" --steps 3 2>>"$W/log" || fail "2-rank run"
diff <(batches "$W/m.out") <(metrics "$W/m" 1 3) || fail "the 2-rank dry run's batches are not the run's"
# the same errors as a real start (stderr byte for byte)
same_error() {
  local out=$1; shift
  local a=0 b=0
  $T train "$@" --dry-run >/dev/null 2>"$W/e1" || a=$?
  $T train "$@" >/dev/null 2>"$W/e2" || b=$?
  [ $a -eq 1 ] && [ $b -eq 1 ] || fail "exit $a (dry) and $b (real), expected 1: $*"
  cmp "$W/e1" "$W/e2" || { diff "$W/e1" "$W/e2"; fail "the dry run's error differs: $*"; }
  grep -q "$out" "$W/e1" || { cat "$W/e1"; fail "no /$out/: $*"; }
}
same_error "unknown key train.nope" "${R[@]}" --out "$W/e" --set train.nope=1
same_error "store .* has patch 2x16x16" "${R[@]}" --out "$W/e" --set model.pt=1
same_error "already holds checkpoints" "${R[@]}" --out "$W/d" --steps 2
same_error "no checkpoint" "${R[@]}" --out "$W/empty" --steps 2 --resume
same_error "would change what the run trains" --resume "$W/d" --steps 12 --set train.lr=1e-3
echo "dry_run: config, memory and the plans of steps 1-3 and 7-9 those of the run; errors the start's"
