#!/usr/bin/env bash
# tests/train/report_browser.sh — a browser opens a `tessera report` page from disk
# (headless Chromium of Debian's chromium-headless-shell, tools/setup.sh) and its
# screenshot is not blank: the inlined curves and sample strips are drawn, not broken
# images on a white page (tests/train/report_shot.py measures it against the page
# without its images).
source "$(dirname "$0")/lib.sh"
need_store
BROWSER=$(command -v chromium-headless-shell || command -v chromium || true)
[ -n "$BROWSER" ] || { echo "SKIP: no headless Chromium (Debian's chromium-headless-shell, tools/setup.sh)"; exit 77; }
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null ||
  { echo "SKIP: /usr/bin/python3 lacks matplotlib (python3-matplotlib, tools/setup.sh)"; exit 77; }
$T train --config "$CONF" --data "$STORE" "${SMALL[@]}" --set model.num_classes=2 \
  --set train.val_clips=3 --set train.val_every=2 --set train.sample_every=3 \
  --set train.sample_steps=1 --out "$W/a" --steps 3 2>/dev/null
$T report "$W/a" >/dev/null
# the same page with every image removed: what a page of broken images would show
sed -E "s/src='data:image[^']*'/src=''/g" "$W/a/report.html" >"$W/a/noimg.html"
shot() {  # shot HTML PNG: a 1000x1400 screenshot (its own profile dir: nothing shared)
  timeout 60 "$BROWSER" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$W/profile" --window-size=1000,1400 --screenshot="$2" "file://$1" \
    >/dev/null 2>&1 || fail "$BROWSER could not take a screenshot of $1"
}
shot "$W/a/report.html" "$W/page.png"
shot "$W/a/noimg.html" "$W/noimg.png"
/usr/bin/python3 "$SRC/tests/train/report_shot.py" "$W/page.png" "$W/noimg.png"
