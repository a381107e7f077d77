#!/usr/bin/env bash
# tests/train/resume_run.sh — a resume from the run alone (RUN/config.ini, docs/train.md
# "Resume"): `tessera train --resume RUN --steps 10`, from another directory and without
# --config, --data or --set, continues a 6-step run bitwise as the 10-step run that never
# stopped (every loss, lr and norm, the final checkpoint byte for byte); the file is
# readable (every key, floats as written, absolute paths); a --set that would change what
# the run trains is refused naming the key, one that is safe is applied and recorded; a
# run without the file is refused saying what to give.
source "$(dirname "$0")/lib.sh"
need_store
train() { $T train --config "$CONF" --data "$STORE" "${SMALL[@]}" "$@" 2>>"$W/log"; }
train --out "$W/a" --steps 10
train --out "$W/b" --steps 6
F=$W/b/config.ini
[ -f "$F" ] || fail "no config.ini after a fresh run"
grep -qx "data = $STORE" "$F" || fail "config.ini's data: $(grep '^data' "$F")"
grep -qx "config = $CONF" "$F" || fail "config.ini's config: $(grep '^config' "$F")"
grep -qx "steps = 6" "$F" || fail "config.ini's steps: $(grep '^steps' "$F")"
grep -qx "set = train.lr=2e-3" "$F" || fail "config.ini lacks the --set as given"
grep -qx "lr = 0.002" "$F" || fail "train.lr not as written: $(grep '^lr' "$F")"
# every key of the config the checkpoint records is in the file, with the same value
ckpt_cfg=$(python3 -c 'import json,struct,sys
f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]
print(json.loads(f.read(n))["__metadata__"]["config"])' "$W/b/ckpt-6.safetensors")
while IFS= read -r line; do
  case $line in *" = "*) grep -qxF -- "$line" "$F" || fail "config.ini lacks '$line'";; esac
done <<<"$ckpt_cfg"
mkdir -p "$W/elsewhere"
(cd "$W/elsewhere" && $T train --resume "$W/b" --steps 10 2>>"$W/log") ||
  { tail -5 "$W/log"; fail "resume from the run alone"; }
diff <(jq -r '[.loss,.lr,.grad_norm,.clips,.tokens]|@tsv' "$W/a/metrics.jsonl") \
     <(jq -r '[.loss,.lr,.grad_norm,.clips,.tokens]|@tsv' "$W/b/metrics.jsonl") ||
  fail "losses of the resume from the run alone differ from the straight run"
cmp "$W/a/ckpt-10.safetensors" "$W/b/ckpt-10.safetensors" || fail "ckpt-10 differs"
grep -qx "steps = 10" "$F" || fail "the resume's --steps not recorded: $(grep '^steps' "$F")"
# unsafe overrides: refused naming the key, nothing trained
expect_fail "--set train.lr would change what the run trains \(0.002 in .*config.ini, 0.001 asked\)" \
  $T train --resume "$W/b" --steps 11 --set train.lr=1e-3
expect_fail "--set model.hidden would change" $T train --resume "$W/b" --steps 11 \
  --set model.hidden=32 --set model.heads=2
expect_fail "--set train.steps would change" $T train --resume "$W/b" --steps 11 --set train.steps=80
[ ! -f "$W/b/ckpt-11.safetensors" ] || fail "a refused resume trained"
# a safe one (the metrics cadence) is applied and appended to the file's overrides
$T train --resume "$W/b" --steps 12 --set train.log_every=2 2>>"$W/log"
[ "$(jq -r .step "$W/b/metrics.jsonl" | tail -2 | tr '\n' ' ')" = "10 12 " ] ||
  fail "log_every=2 not applied: $(jq -r .step "$W/b/metrics.jsonl" | tail -3 | tr '\n' ' ')"
[ "$(grep '^set = ' "$F" | tail -1)" = "set = train.log_every=2" ] || fail "the resume's --set not recorded"
# a run from before the file: say what to give
rm "$F"
expect_fail "--resume .*: no config.ini there .*give the --config, --data and --set" \
  $T train --resume "$W/b" --steps 13
# ... which works as before, and writes the file for the next resume
train --out "$W/b" --steps 13 --resume
[ -f "$F" ] && grep -qx "steps = 13" "$F" || fail "a resume with --config did not write config.ini"
echo "resume_run: losses $(losses "$W/a" | head -1) .. $(losses "$W/a" | tail -1) identical from RUN/config.ini alone"
