"""bench/ingest/scene_cut_psd.py — the baseline of bench/ingest/scene_cut.sh: PySceneDetect's
ContentDetector (defaults: threshold 27, min_scene_len 15 frames) on one video, run with
the python of the venv that holds scenedetect 0.7.2. Prints one JSON object.

  scene_cut_psd.py FILE REPEAT

Two timings, each the fastest of REPEAT runs:
- end to end: scenedetect.detect(FILE, ContentDetector()), its own OpenCV decode and its
  shrink to 256 pixels wide included;
- detector only: the frames decoded and shrunk first (as its SceneManager does: cv2.resize
  to width / (width / 256), linear), then ContentDetector.process_frame over them.
"""
import json
import sys
import time

import cv2
from scenedetect import ContentDetector, FrameTimecode, detect, __version__


def decoded_frames(path):
    cap = cv2.VideoCapture(path)
    fps = cap.get(cv2.CAP_PROP_FPS)
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        h, w = frame.shape[:2]
        if w > 256:
            factor = w / 256.0
            frame = cv2.resize(frame, (max(1, round(w / factor)), max(1, round(h / factor))),
                               interpolation=cv2.INTER_LINEAR)
        frames.append(frame)
    cap.release()
    return fps, frames


def main():
    path, repeat = sys.argv[1], int(sys.argv[2])
    cv2.setNumThreads(1)
    best = float("inf")
    scenes = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        scenes = detect(path, ContentDetector())
        best = min(best, time.perf_counter() - t0)
    fps, frames = decoded_frames(path)
    best_detect = float("inf")
    for _ in range(repeat):
        det = ContentDetector()
        t0 = time.perf_counter()
        for i, frame in enumerate(frames):
            det.process_frame(FrameTimecode(i, fps=fps), frame)
        best_detect = min(best_detect, time.perf_counter() - t0)
    print(json.dumps({
        "version": __version__, "opencv": cv2.__version__, "frames": len(frames),
        "width": frames[0].shape[1] if frames else 0,
        "height": frames[0].shape[0] if frames else 0,
        "end_to_end_s": best, "detect_s": best_detect,
        "cuts": [round(s[0].seconds, 4) for s in scenes[1:]],
    }))


if __name__ == "__main__":
    main()
