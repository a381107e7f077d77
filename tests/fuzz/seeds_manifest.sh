# seeds_manifest.sh — seeds for fuzz_manifest: a small manifest of each preset in its real
# shape (Panda-70M's list cells, OpenVid's spaced names, Open-Sora's frame ranges, tessera's
# JSONL spans) behind the byte that picks preset and syntax, and a filter text behind 0x80
# (sourced by tools/fuzz.sh).
{ printf '\x01'; cat <<'CSV'
videoID,url,timestamp,caption,matching_score
--0ET3wmu_o,https://www.youtube.com/watch?v=--0ET3wmu_o,"[['0:00:00.000', '0:00:05.005'], ['0:00:05.005', '0:00:13.347']]","['a man talks', ""a woman's hands""]","[0.46, 0.43]"
-1HzbWE0yjk,u,"[['0:00:10.000', '0:00:08.000']]","['backwards']",[0.3]
CSV
} >"$OUT/panda70m.csv"
{ printf '\x02'; cat <<'CSV'
video,caption,aesthetic score,motion score,temporal consistency score,camera motion,frame,fps,seconds
celebv_0.mp4,"a woman, talking; ""hello"".",5.1,0.89,0.98,static,99,25.0,3.96
CSV
} >"$OUT/openvid.csv"
{ printf '\x03'; printf 'path,text,num_frames,fps,start_frame,end_frame,start,end\r\na.mp4,"two\r\nlines",48,24,12,60,,\r\nb.mp4,x,48,,,,0:00:01.5,2\r\n'; } >"$OUT/opensora.csv"
{ printf '\x04'; printf 'path\tstart\tend\tcaption\na.mp4\t1\t2\t"tab\tin quotes"\n'; } >"$OUT/tessera.tsv"
{ printf '\x08'; cat <<'JSONL'
{"path": "long/talk.mp4", "spans": [{"start": 0, "end": 12.5, "caption": "a talk", "clarity": 0.75}, {"start": "0:00:12.500"}], "aesthetic": 5.5}
{"path": "x.mp4", "caption": 12}
JSONL
} >"$OUT/tessera.jsonl"
{ printf '\x80'; printf 'where aesthetic_score >= 4.5; where fps != 0.1; min_clip_seconds 2; max_clip_seconds 60; min_resolution 256'; } >"$OUT/filter"
