# tests/shared.sh — sourced by the shell tests that read the shared data (real clips,
# length distributions) at $TESSERA_SHARED, which ctest sets to ../shared: a plain clone
# has no such folder, and those tests are then skipped (exit 77, ctest's SKIP_RETURN_CODE).
# need_shared SUB...: exits 77 naming the first of $TESSERA_SHARED/SUB... that is not a folder.
need_shared() {
  local s
  for s in "$@"; do
    if [ -z "${TESSERA_SHARED:-}" ] || ! [ -d "$TESSERA_SHARED/$s" ]; then
      echo "SKIP: no $s at ${TESSERA_SHARED:-\$TESSERA_SHARED}/$s (a checkout with ../shared beside it," \
        "or TESSERA_SHARED naming that folder, runs this test)"
      exit 77
    fi
  done
}
