# tests/dist/ranks_store.sh — sourced by the ranks tests of tests/dist/ (train_ranks.sh,
# lora_ranks.sh, zero_ranks.sh, lora_zero.sh, any_ranks.sh and others): ranks_store DIR makes their store in DIR/store: 4 clips of 1..4 s at 4 fps,
# 40x32 pixels, patch 1x4x4 (80 tokens a frame: 320, 640, 960 and 1280 tokens), so that a
# mem_tokens of 700 splits the longer clips across ranks (ring attention), and sets
# RANKS_MODEL, the arguments of the model they train on it (tiny with the store's patch,
# hidden 32, 2 heads, all 4 clips a step). Needs T (tessera), SRC (the source tree) and
# ffmpeg. ranks_begin NAME sets what lora_ranks.sh, zero_ranks.sh and lora_zero.sh start
# with (and their store); ranks_train runs one training of zero_ranks.sh and any_ranks.sh,
# ranks_run one of mask_ranks.sh and placed_ranks.sh; the comparisons of zero_ranks.sh,
# lora_zero.sh, mask_ranks.sh and placed_ranks.sh are over run directories in W (fail
# reports): close, worst, within, sums, field.

# tests/lib.sh: T and SRC from ctest's environment, scratch, fail, ok/bad/tally.
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# ranks_begin NAME: W a scratch directory removed at exit, MPI (the launcher, allowed to
# run as root), one thread a rank, the store (ranks_store) in W and CONF, its model with
# a short schedule (warm-up 2, lr 2e-3, every step logged).
ranks_begin() {
  scratch "$1"
  export OMP_NUM_THREADS=1
  export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
  export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
  MPI=(mpirun --oversubscribe)
  ranks_store "$W"
  CONF=("${RANKS_MODEL[@]}" --set train.warmup=2 --set train.lr=2e-3 --set train.log_every=1)
}
# ranks_train NAME RANKS ARGS...: `tessera train` with the caller's CONF and ARGS, on RANKS
# ranks under mpirun into $W/NAME (one rank alone holds whole clips: a larger mem_tokens),
# its log in $W/NAME.log (the tail shown when it fails)
ranks_train() {
  local name=$1 n=$2; shift 2
  local mem=700 launch=("${MPI[@]}" -np "$n")
  [ "$n" = 1 ] && mem=2048 launch=()
  "${launch[@]}" "$T" train "${CONF[@]}" --set train.mem_tokens=$mem "$@" --out "$W/$name" \
    >"$W/$name.log" 2>&1 || { tail -5 "$W/$name.log"; fail "$name"; }
}

# ranks_run NAME RANKS MEM ARGS...: `tessera train` with the caller's CONF, train.mem_tokens
# MEM and ARGS on RANKS ranks (one: no launcher) into $W/NAME, its stderr in $W/NAME.log
# (the tail in the failure)
ranks_run() {
  local name=$1 n=$2 mem=$3 launch=("${MPI[@]}" -np "$2"); shift 3
  [ "$n" = 1 ] && launch=()
  "${launch[@]}" "$T" train "${CONF[@]}" --set train.mem_tokens="$mem" "$@" --out "$W/$name" \
    2>"$W/$name.log" >/dev/null || fail "$name: $(tail -3 "$W/$name.log")"
}
# worst A B KEY STEPS: the largest relative difference of KEY between the metrics of the
# run directories A and B (against B's), over their STEPS lines; false unless both have
# STEPS values
worst() {
  paste <(jq -r ".$3" "$1/metrics.jsonl") <(jq -r ".$3" "$2/metrics.jsonl") |
    awk -v steps="$4" '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2); if (r > m) m = r; n++ }
         END { if (n != steps) exit 1; printf "%.3g\n", m }'
}
# within A B KEY STEPS WHAT: KEY of the runs $W/A and $W/B (STEPS steps each) within 1e-5
# relative (fail reports WHAT otherwise); D is the worst difference
within() {
  D=$(worst "$W/$1" "$W/$2" "$3" "$4") || fail "$2: not $4 values of $3"
  awk -v d="$D" 'BEGIN { exit !(d <= 1e-5) }' || fail "$5 differ in $3 by $D"
  echo "ok: $5: $3 within $D"
}

# rank1_pid RUN: the process id of rank 1 of the `tessera train` whose command line names
# RUN (nothing if there is none).
rank1_pid() {
  local p
  for p in $(pgrep -f "tessera train.*$1" || true); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then echo "$p"; fi
  done | tail -1
}
# ranks_kill PID JOB: kills PID (a rank of the mpirun job JOB, started in the background by
# this shell) and waits for JOB to end (90 s at the most): RC is its exit status, TOOK the
# seconds from the kill to its end.
ranks_kill() {
  local start
  start=$(date +%s)
  kill -9 "$1"
  RC=0
  timeout 90 tail --pid="$2" -f /dev/null || true
  wait "$2" || RC=$?
  TOOK=$(($(date +%s) - start))
}

ranks_store() {
  local w=$1 s
  for s in 1 2 3 4; do
    ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=s=160x128:r=12:d=$s" "$w/c$s.mp4"
  done
  "$T" ingest "$w"/c*.mp4 --out "$w/store" --fps 4 --short-side 32 --patch 1x4x4 --quiet
  RANKS_MODEL=(--config "$SRC/configs/model/tiny.conf" --data "$w/store"
               --set model.pt=1 --set model.ph=4 --set model.pw=4 --set model.hidden=32
               --set model.heads=2 --set train.global_batch=4)
}

# close A B KEY [FIRST]: KEY of every metrics line (from FIRST) within 1e-5 relative
close() {
  paste <(jq -r ".$3" "$W/$1/metrics.jsonl" | tail -n +"${4:-1}") \
        <(jq -r ".$3" "$W/$2/metrics.jsonl" | tail -n +"${4:-1}") |
    awk -v what="$2 vs $1: $3" '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1);
           if (r > m) m = r; n++ }
         END { printf "ok: %s: %d steps, worst relative difference %.3g\n", what, n, m;
               exit !(n > 0 && m <= 1e-5) }' || fail "$3 differs: $2 vs $1"
}
sums() {  # the four set checksums of a checkpoint
  python3 -c 'import json,struct,sys; f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]
m=json.loads(f.read(n))["__metadata__"]; print(*[m[k] for k in ("xxh3_weights","xxh3_ema","xxh3_adam_m","xxh3_adam_v")])' "$1"
}
field() {  # field LOG peak|model: the backend's measured peak, the model's count (bytes)
  case $2 in
    peak) sed -n 's/.*allocations peaked at [0-9.]* GiB (\([0-9]*\) bytes).*/\1/p' "$1" ;;
    model) sed -n 's/.*the model counts [0-9.]* GiB (\([0-9]*\) bytes,.*/\1/p' "$1" ;;
  esac | head -1
}
