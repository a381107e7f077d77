"""tests/train/report_shot.py — a browser's screenshot of a report page is not blank: more
than 5% of its pixels are neither white nor near-white, its colours are many (curves in
colour, sample frames), and it differs from the screenshot of the same page without its
images (which only has text) in at least 10% of the pixels.
  report_shot.py PAGE.png NOIMG.png
"""
import sys

import matplotlib.image as mpimg
import numpy as np


def main():
    page = mpimg.imread(sys.argv[1])[..., :3]
    noimg = mpimg.imread(sys.argv[2])[..., :3]
    inked = float((page.min(axis=2) < 0.9).mean())
    colours = len(np.unique((page * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    changed = float((np.abs(page - noimg).max(axis=2) > 0.1).mean()) if page.shape == noimg.shape else 1.0
    print("report_shot: %dx%d screenshot: %.1f%% inked, %d colours, %.1f%% differ from the page "
          "without images" % (page.shape[1], page.shape[0], 100 * inked, colours, 100 * changed))
    if inked < 0.05 or colours < 200 or changed < 0.10:
        sys.exit("FAIL: the screenshot looks blank or without its images")


if __name__ == "__main__":
    main()
