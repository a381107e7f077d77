# model/train.cmake — the trainer (tsr_train): data/sampler, LR schedule, step, metrics,
# checkpoints, run loop and sampler of `tessera train` / `tessera sample` (docs/train.md).
add_library(tsr_train STATIC
  ${CMAKE_CURRENT_LIST_DIR}/data.c
  ${CMAKE_CURRENT_LIST_DIR}/lr.c
  ${CMAKE_CURRENT_LIST_DIR}/metrics.c
  ${CMAKE_CURRENT_LIST_DIR}/step.c
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint.c
  ${CMAKE_CURRENT_LIST_DIR}/sample.c
  ${CMAKE_CURRENT_LIST_DIR}/train.c
)
target_link_libraries(tsr_train PUBLIC tsr_model tsr_sched tsr_ingest tsr_kernels tsr_core
                      PkgConfig::JANSSON m)
