# bench/plan/mixes.sh — sourced by the plan benchmarks: MIXES, the six length mixes they
# plan ("NAME|FILE:WEIGHT,FILE:WEIGHT" over the shared length distributions), and full_spec.
MIXES=(
  "ucf101+3%youcook2|ucf101_clips.csv:0.97,youcook2_videos.csv:0.03"
  "ucf101+5%anet-videos|ucf101_clips.csv:0.95,activitynet_captions_videos.csv:0.05"
  "webvid+4%anet-videos|webvid10m_val.csv:0.96,activitynet_captions_videos.csv:0.04"
  "webvid+3%youcook2|webvid10m_val.csv:0.97,youcook2_videos.csv:0.03"
  "anet-events+5%youcook2|activitynet_captions_events.csv:0.95,youcook2_videos.csv:0.05"
  "charades+2%anet-videos|charades_videos.csv:0.98,activitynet_captions_videos.csv:0.02"
)
# full_spec SPEC: the mix spec (FILE:WEIGHT,...) with the lengths folder $LEN in front of
# every file.
full_spec() {
  local spec=$1 full="" p parts
  IFS=, read -ra parts <<<"$spec"
  for p in "${parts[@]}"; do full+="${full:+,}$LEN/$p"; done
  echo "$full"
}
