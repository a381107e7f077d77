"""tests/sched/timeline_check.py — the picture of `tessera plan --timeline` against the plan:
the boxes it drew (its PNG metadata, tools/plan_timeline.py) are the groups with clips of
step 0 of `--json`'s plan, in order, with the same ranks and clips; the boxes' last end plus
the all-reduce is the step time `--json` predicts (planned) and its packing-only time
(static), with train.zero plus at most ZeRO's exposed time; both plans run every clip of the batch once, no two boxes of a rank overlap; the
lower bound is --json's. Prints what it checked; exits 1 naming the first difference.
  timeline_check.py PLAN.json TIMELINE.json TIMELINE.png
"""
import json
import sys

from PIL import Image


def fail(msg):
    sys.exit("FAIL: timeline_check: " + msg)


def close(a, b):
    # --json writes 9 significant digits: half a unit of the 9th is up to 5e-9 of the value
    return abs(a - b) <= 5e-9 * max(1.0, abs(a), abs(b))


def main():
    plan_path, tl_path, png_path = sys.argv[1:4]
    with open(plan_path) as f:
        step = json.load(f)["steps"][0]
    with open(tl_path) as f:
        tl = json.load(f)
    img = Image.open(png_path)
    img.load()
    if "tessera-timeline" not in img.text:
        fail("%s holds no boxes (metadata tessera-timeline)" % png_path)
    boxes = json.loads(img.text["tessera-timeline"])
    planned = [b for b in boxes if b[0] == "planned"]
    static = [b for b in boxes if b[0] == "static"]
    want = [[g["first_rank"], g["size"], g["clips"]] for w in step["waves"] for g in w["groups"]
            if g["clips"]]
    if [[b[1], b[2], b[5]] for b in planned] != want:
        fail("the planned boxes are not --json's groups of step 0 (%d boxes, %d groups)"
             % (len(planned), len(want)))
    batch = sorted(c["id"] for c in step["clips"])
    ar = tl["allreduce_s"]
    for name, bs, t in (("planned", planned, step["predicted_s"]),
                        ("static", static, step["packing_only_s"])):
        if sorted(i for b in bs for i in b[5]) != batch:
            fail("%s: the boxes do not hold every clip of the batch once" % name)
        end = max(b[3] + b[4] for b in bs)
        # train.zero: what follows the last box is the all-reduce and a part of ZeRO's
        # exposed communication (its waves' collectives run between and after the boxes)
        zero = [p for p in tl["plans"] if p["role"] == name][0].get("zero_s", 0)
        if zero == 0 and not close(end + ar, t):
            fail("%s: boxes end at %.17g + all-reduce %.17g, --json predicts %.17g"
                 % (name, end, ar, t))
        if zero > 0 and not (end + ar <= t * (1 + 5e-9) and t <= (end + ar + zero) * (1 + 5e-9)):
            fail("%s: boxes end at %.17g + all-reduce %.17g, --json predicts %.17g, more than "
                 "ZeRO's %.17g after them or less than nothing" % (name, end, ar, t, zero))
        for r in range(tl["ranks"]):
            spans = sorted((b[3], b[3] + b[4]) for b in bs if b[1] <= r < b[1] + b[2])
            if any(spans[i][1] > spans[i + 1][0] + 1e-12 for i in range(len(spans) - 1)):
                fail("%s: boxes overlap on rank %d" % (name, r))
    if not close(tl["lower_bound_s"], step["lower_bound_s"]):
        fail("lower bound %r != --json's %r" % (tl["lower_bound_s"], step["lower_bound_s"]))
    print("timeline_check: %s (%dx%d): %d planned boxes = --json's groups, %d static boxes; "
          "step %.6g s and %.6g s as --json predicts" % (png_path, img.size[0], img.size[1],
                                                        len(planned), len(static),
                                                        step["predicted_s"],
                                                        step["packing_only_s"]))


if __name__ == "__main__":
    main()
