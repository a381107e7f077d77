#!/usr/bin/env bash
# tests/model/wan_lora_resume.sh — a LoRA run resumes bitwise (docs/train.md "LoRA"), on
# generated latents with captions (as wan_lora_train.sh) and a tiny Wan base trained 4 steps:
# - the checkpoint of a LoRA run holds the adapters, their EMA and AdamW moments (adapter-
#   sized) and its base's identity: base_weights = the base checkpoint's xxh3_weights, and
#   base_xxh3:<tensor> = its xxh3:<tensor> for every base tensor; ckpt_keep holds, for the
#   adapter files lora-STEP too;
# - 8 steps straight == 6 steps, the checkpoint of step 6 lost (a crash after its metrics
#   lines), --resume to 8; and == a run killed with SIGKILL mid-way, resumed to 8: every
#   loss (17 digits) and the final adapter file and checkpoint byte for byte;
# - refused, naming the file and what to do: a base gone from its recorded path (then
#   --resume --init at its new place continues, bitwise), a base whose weights changed and
#   --init of another base (the differing tensor named), --init of a LoRA run's checkpoint.
# - bf16 activations: 4 steps == 2 + --resume 2, bitwise;
# - with mpirun, the same on 2 ranks.
set -euo pipefail
. "$(dirname "$0")/colour_store.sh"  # tests/lib.sh, colour_begin
colour_begin loraresume 2  # 4 colours x 2 captioned latent clips, CFG of global batch 4
"$T" train "${CFG[@]}" --out "$W/base" --steps 4 --set train.steps=4 --set train.lr=2e-3 \
  --set train.ckpt_every=2 --set train.ckpt_keep=5 2>"$W/base.log" ||
  { tail -5 "$W/base.log"; fail "the base's training"; }
BASE=$W/base/ckpt-4.safetensors
# shellcheck disable=SC2054  # lora.targets is a comma-separated list, one element
LORA=(--set train.steps=8 --set train.lr=5e-3 --set train.ckpt_every=2 --set train.ckpt_keep=2
      --set lora.rank=4 --set lora.alpha=4 --set lora.targets=to_q,to_v,ffn.net.2)
TRAIN=("$T" train "${CFG[@]}" "${LORA[@]}")
lora() { "${TRAIN[@]}" "$@" 2>>"$W/lora.log"; }
losses() { jq -r .loss "$1/metrics.jsonl"; }

lora --init "$BASE" --out "$W/a" --steps 8 || { tail -5 "$W/lora.log"; fail "LoRA run a"; }
kept=("$W"/a/ckpt-*.safetensors)
[ ${#kept[@]} -eq 2 ] && [ -f "$W/a/ckpt-8.safetensors" ] &&
  [ -f "$W/a/ckpt-6.safetensors" ] || fail "ckpt_keep=2: $(ls "$W/a")"
[ -f "$W/a/lora-8.safetensors" ] || fail "no adapter file lora-8"
kept=("$W"/a/lora-*.safetensors)  # the adapter files go with their checkpoints
[ ${#kept[@]} -eq 2 ] && [ -f "$W/a/lora-6.safetensors" ] ||
  fail "ckpt_keep=2 keeps the adapter files lora-6 and lora-8: $(ls "$W/a")"
python3 - "$BASE" "$W/a/ckpt-8.safetensors" "$W/a/lora-8.safetensors" <<'PYEOF' || fail "checkpoint contents"
import json, struct, sys
def header(path):
    with open(path, 'rb') as f:
        return json.loads(f.read(struct.unpack('<Q', f.read(8))[0]))
base, ck, peft = (header(p) for p in sys.argv[1:4])
bm, cm = base.pop('__metadata__'), ck.pop('__metadata__')
adapters = {k[len('transformer.'):] for k in peft if k != '__metadata__'}
assert adapters and all('.lora_A.' in a or '.lora_B.' in a for a in adapters), adapters
want = {p + a for p in ('', 'ema.', 'adam_m.', 'adam_v.') for a in adapters}
assert set(ck) == want, f"tensors {sorted(set(ck) ^ want)[:4]} differ from the adapter sets"
assert cm['base_model'] == sys.argv[1], cm['base_model']
assert cm['base_weights'] == bm['xxh3_weights'], (cm['base_weights'], bm['xxh3_weights'])
weights = [k for k in base if not k.startswith(('ema.', 'adam_m.', 'adam_v.'))]
for name in weights:
    assert cm['base_xxh3:' + name] == bm['xxh3:' + name], name
n = sum(k.startswith('base_xxh3:') for k in cm)
assert n == len(weights), (n, len(weights))
print(f"ok: LoRA checkpoint: {len(adapters)} adapters x 4 sets, the base's {n} tensor checksums")
PYEOF

# a crash after step 6's metrics: ckpt-6 lost, resumed from ckpt-4
lora --init "$BASE" --out "$W/b" --steps 6 || fail "LoRA run b to 6"
rm "$W/b/ckpt-6.safetensors"
lora --out "$W/b" --steps 8 --resume || { tail -5 "$W/lora.log"; fail "--resume of b"; }
grep -q "resuming bitwise" "$W/lora.log" || fail "the resume does not say it is bitwise"
# SIGKILL at whatever moment after the first checkpoint
"${TRAIN[@]}" --init "$BASE" --out "$W/c" --steps 8 2>>"$W/lora.log" &
pid=$!  # tessera itself (not a subshell of the function lora)
# after its third step's metrics line (a run of these steps takes about a second)
while kill -0 $pid 2>/dev/null && [ "$(cat "$W/c/metrics.jsonl" 2>/dev/null | wc -l)" -lt 3 ]; do
  sleep 0.002
done
kill -9 $pid 2>/dev/null && echo "killed at step $(wc -l < "$W/c/metrics.jsonl"): $(ls "$W/c" | tr '\n' ' ')"
wait $pid 2>/dev/null || true
lora --out "$W/c" --steps 8 --resume || { tail -5 "$W/lora.log"; fail "--resume of c"; }
for r in b c; do
  [ "$(jq -r .step "$W/$r/metrics.jsonl" | tr '\n' ' ')" = "1 2 3 4 5 6 7 8 " ] ||
    fail "$r: metrics steps are $(jq -r .step "$W/$r/metrics.jsonl" | tr '\n' ' ')"
  diff <(losses "$W/a") <(losses "$W/$r") || fail "$r: losses differ from the straight run"
  cmp "$W/a/lora-8.safetensors" "$W/$r/lora-8.safetensors" || fail "$r: lora-8 differs"
  cmp "$W/a/ckpt-8.safetensors" "$W/$r/ckpt-8.safetensors" || fail "$r: ckpt-8 differs"
done
echo "ok: LoRA resume bitwise: losses $(losses "$W/a" | head -1) .. $(losses "$W/a" | tail -1), lora-8 and ckpt-8 byte-equal (crash and SIGKILL)"

# the base gone from its recorded path: refused naming it; --init gives its new place
cp "$BASE" "$W/base2.safetensors"
lora --init "$W/base2.safetensors" --out "$W/d" --steps 2 || fail "LoRA run d"
mv "$W/base2.safetensors" "$W/moved.safetensors"
expect_fail "base2.safetensors.*cannot be read.*--init BASE" "${TRAIN[@]}" --out "$W/d" --steps 4 --resume
lora --out "$W/d" --steps 4 --resume --init "$W/moved.safetensors" || { tail -3 "$W/lora.log"; fail "--resume --init moved"; }
diff <(losses "$W/a" | head -4) <(losses "$W/d") || fail "d: losses differ from a's first 4"
# the base's weights changed in place, or another base given: the differing tensor named
cp "$W/base/ckpt-2.safetensors" "$W/moved.safetensors"
expect_fail "tensor [a-z_0-9.]+ differs from the one the adapters of checkpoint .*ckpt-4.safetensors" \
  "${TRAIN[@]}" --out "$W/d" --steps 6 --resume --init "$W/moved.safetensors"
expect_fail "base .*ckpt-2.safetensors.*not the one this LoRA run trained on.*tensor [a-z_0-9.]+ differs" \
  "${TRAIN[@]}" --out "$W/a" --steps 8 --resume --init "$W/base/ckpt-2.safetensors"
# a LoRA run's checkpoint is not a base
expect_fail "is a LoRA run's: it holds the adapters" "${TRAIN[@]}" --init "$W/a/ckpt-8.safetensors" --out "$W/e" --steps 2

# bf16 activations (the adapters' working copy is rebuilt from the loaded masters)
B16=(--set train.precision=bf16)
"${TRAIN[@]}" "${B16[@]}" --init "$BASE" --out "$W/h1" --steps 4 >/dev/null 2>&1 || fail "bf16, 4 steps"
"${TRAIN[@]}" "${B16[@]}" --init "$BASE" --out "$W/h2" --steps 2 >/dev/null 2>&1 || fail "bf16, 2 steps"
"${TRAIN[@]}" "${B16[@]}" --out "$W/h2" --steps 4 --resume >/dev/null 2>&1 || fail "bf16, --resume"
diff <(losses "$W/h1") <(losses "$W/h2") || fail "bf16: losses differ after the resume"
cmp "$W/h1/ckpt-4.safetensors" "$W/h2/ckpt-4.safetensors" || fail "bf16: ckpt-4 differs"
echo "ok: bf16: 4 steps == 2 + --resume 2, bitwise"

# with mpirun: 2 ranks (the adapters' gradient all-reduced) resume bitwise as well
if command -v mpirun >/dev/null; then
  mp() { mpirun --oversubscribe -np 2 "${TRAIN[@]}" --set train.mem_tokens=64 "$@" 2>>"$W/mpi.log"; }
  mp --init "$BASE" --out "$W/m1" --steps 4 || { tail -5 "$W/mpi.log"; fail "2 ranks, 4 steps"; }
  mp --init "$BASE" --out "$W/m2" --steps 2 || fail "2 ranks, 2 steps"
  mp --out "$W/m2" --steps 4 --resume || { tail -5 "$W/mpi.log"; fail "2 ranks, --resume"; }
  diff <(losses "$W/m1") <(losses "$W/m2") || fail "2 ranks: losses differ after the resume"
  cmp "$W/m1/ckpt-4.safetensors" "$W/m2/ckpt-4.safetensors" || fail "2 ranks: ckpt-4 differs"
  echo "ok: 2 ranks: 4 steps == 2 + --resume 2, bitwise"
fi
