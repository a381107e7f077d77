# tests/dist/ranks_store.sh — sourced by the ranks tests of tests/dist/ (train_ranks.sh,
# lora_ranks.sh, zero_ranks.sh, lora_zero.sh, any_ranks.sh and others): ranks_store DIR makes their store in DIR/store: 4 clips of 1..4 s at 4 fps,
# 40x32 pixels, patch 1x4x4 (80 tokens a frame: 320, 640, 960 and 1280 tokens), so that a
# mem_tokens of 700 splits the longer clips across ranks (ring attention), and sets
# RANKS_MODEL, the arguments of the model they train on it (tiny with the store's patch,
# hidden 32, 2 heads, all 4 clips a step). Needs T (tessera), SRC (the source tree) and
# ffmpeg. ranks_begin NAME sets what lora_ranks.sh, zero_ranks.sh and lora_zero.sh start
# with; ranks_train runs one training of zero_ranks.sh and any_ranks.sh; the comparisons of
# zero_ranks.sh and lora_zero.sh are over run directories in W (fail reports): close, sums,
# field.

# ranks_begin NAME: T and SRC from ctest's environment, W a scratch directory removed at
# exit, fail (reports and exits), MPI (the launcher), one thread a rank.
ranks_begin() {
  T=${TESSERA_BIN:?set by ctest}
  SRC=${TESSERA_SRC:?set by ctest}
  W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-$1.XXXXXX")
  trap 'rm -rf "$W"' EXIT
  export OMP_NUM_THREADS=1
  MPI=(mpirun --oversubscribe)
}
fail() { echo "FAIL: $*" >&2; exit 1; }
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
