"""tools/plan_timeline.py — draws one batch's plan from the JSON of `tessera plan --timeline`
(sched/plan_timeline.h): ranks up, time to the right, each microbatch a box over its ranks
from its start for its predicted time, coloured by CP size and labelled with its clips;
the planner's plan above the same batch under static CP with packing only, each with its
predicted step time, its idle share and the batch's lower bound marked. With many ranks
(more than 64) the boxes are not labelled and the rank axis counts nodes; a bar on the
right gives each block of ranks' idle share, so thousands of ranks stay readable.

The boxes drawn are written into the PNG's metadata (text key "tessera-timeline": JSON
[[plan, first_rank, size, start_s, time_s, [clip ids]], ...]), so a test can hold the
picture to the plan it was drawn from (tests/sched/timeline.sh).
  /usr/bin/python3 tools/plan_timeline.py TIMELINE.json OUT.png
"""
import io
import json
import sys

try:
    import matplotlib
except ImportError:
    sys.exit("plan_timeline: %s lacks matplotlib: install Debian's python3-matplotlib "
             "(tools/setup.sh) or set TESSERA_SYSTEM_PYTHON" % sys.executable)
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.collections import PatchCollection  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402

from fs_atomic import write_atomic  # noqa: E402  (tools/fs_atomic.py, beside this file)

LABELLED_RANKS = 64  # above this the boxes lose their labels and ranks are counted by node
IDLE_BLOCKS = 32     # rows of the idle bar


def cp_colour(size):
    """the same colour for a CP size in both panels: one of tab10's by log2(size)"""
    return plt.get_cmap("tab10")((size.bit_length() - 1) % 10)


def draw_plan(ax, bar, doc, p, xmax):
    n = doc["ranks"]
    rects, colours = [], []
    for g in p["groups"]:
        rects.append(Rectangle((g["start_s"], g["first_rank"]), g["time_s"], g["size"]))
        colours.append(cp_colour(g["size"]))
    ax.add_collection(PatchCollection(rects, facecolors=colours,
                                      edgecolors="black" if n <= LABELLED_RANKS else "none",
                                      linewidths=0.5))
    if n <= LABELLED_RANKS:
        for g in p["groups"]:
            ids = [str(c["id"]) for c in g["clips"]]
            text = ",".join(ids) if len(ids) <= 3 else "%s..+%d" % (",".join(ids[:2]), len(ids) - 2)
            if g["time_s"] > 0.04 * xmax:
                ax.text(g["start_s"] + g["time_s"] / 2, g["first_rank"] + g["size"] / 2, text,
                        ha="center", va="center", fontsize=6, clip_on=True)
    ax.axvline(p["makespan_s"], color="black", linewidth=1)
    ax.axvline(p["step_s"], color="black", linestyle="--", linewidth=1)
    ax.axvline(doc["lower_bound_s"], color="red", linestyle=":", linewidth=1.5)
    what = "planned: %s" % p["name"] if p["role"] == "planned" else \
        "static CP %d, packing only" % doc["static_cp"]
    zero = p.get("zero_s", 0)
    ax.set_title("%s: step %.4g s (dashed, with the all-reduce%s), idle %.1f%% of rank time; "
                 "lower bound %.4g s (red)"
                 % (what, p["step_s"], " and ZeRO's %.3g s" % zero if zero > 0 else "",
                    100 * p["idle_frac"], doc["lower_bound_s"]), fontsize=9)
    ax.set_xlim(0, xmax)
    ax.set_ylim(n, 0)
    if n <= LABELLED_RANKS:
        ax.set_ylabel("rank", fontsize=8)
    else:
        gpn = doc["gpus_per_node"]
        step = max(1, (n // gpn) // 8) * gpn
        ax.set_yticks(range(0, n + 1, step))
        ax.set_yticklabels([str(r // gpn) for r in range(0, n + 1, step)])
        ax.set_ylabel("node (%d ranks each)" % gpn, fontsize=8)
    ax.tick_params(labelsize=7)
    # idle share per block of ranks: the time each rank of the block is not in a box
    blocks = min(n, IDLE_BLOCKS)
    per = n // blocks
    busy = [0.0] * blocks
    for g in p["groups"]:
        for b in range(g["first_rank"] // per, (g["first_rank"] + g["size"] - 1) // per + 1):
            lo, hi = max(b * per, g["first_rank"]), min((b + 1) * per, g["first_rank"] + g["size"])
            busy[b] += g["time_s"] * (hi - lo)
    idle = [1 - busy[b] / (per * p["makespan_s"]) if p["makespan_s"] > 0 else 0
            for b in range(blocks)]
    bar.barh([b * per + per / 2 for b in range(blocks)], idle, height=per * 0.9, color="gray")
    bar.set_xlim(0, 1)
    bar.set_ylim(n, 0)
    bar.set_yticks([])
    bar.set_title("idle", fontsize=8)
    bar.tick_params(labelsize=7)
    return [[p["role"], g["first_rank"], g["size"], g["start_s"], g["time_s"],
             [c["id"] for c in g["clips"]]] for g in p["groups"]]


def save(fig, out, boxes, src):
    """The PNG with the boxes in a compressed text chunk (zTXt: thousands of ranks' boxes
    would double a plain one's size), through PIL, which matplotlib draws PNGs with"""
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    buf.seek(0)
    info = PngInfo()
    info.add_text("tessera-timeline", json.dumps(boxes, separators=(",", ":")), zip=True)
    info.add_text("Source", src)
    png = io.BytesIO()
    Image.open(buf).save(png, format="png", pnginfo=info, optimize=True)
    write_atomic(out, png.getvalue())


def main():
    src, out = sys.argv[1], sys.argv[2]
    with open(src) as f:
        doc = json.load(f)
    if doc.get("format") != "tessera-plan-timeline":
        sys.exit("plan_timeline: %s is not a tessera plan timeline" % src)
    plans = doc["plans"]
    xmax = 1.05 * max(max(p["step_s"] for p in plans), doc["lower_bound_s"]) or 1.0
    fig, axes = plt.subplots(len(plans), 2, figsize=(12, 3.2 * len(plans)), dpi=80,
                             gridspec_kw={"width_ratios": [12, 1]}, squeeze=False)
    boxes = []
    for (ax, bar), p in zip(axes, plans):
        boxes += draw_plan(ax, bar, doc, p, xmax)
    axes[-1][0].set_xlabel("time (s, the cost model's)", fontsize=8)
    sizes = sorted({g["size"] for p in plans for g in p["groups"]})
    fig.legend(handles=[Patch(color=cp_colour(k), label="CP %d" % k) for k in sizes],
               loc="upper right", ncol=len(sizes), fontsize=7, title="box colour: CP size",
               title_fontsize=7)
    fig.suptitle("batch %d on %d ranks (%d a node), %d tokens a rank" % (
        doc["step"], doc["ranks"], doc["gpus_per_node"], doc["mem_tokens"]), fontsize=10, x=0.3)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    save(fig, out, boxes, src)
    plt.close(fig)
    print("plan_timeline: %s (%d boxes; drawn from %s)" % (out, len(boxes), src))


if __name__ == "__main__":
    main()
