// sched/order.h — deterministic orders of clips, shared by the planners (internal).
#ifndef TESSERA_SCHED_ORDER_H
#define TESSERA_SCHED_ORDER_H

#include <stdint.h>
#include "core/err.h"

// Writes to order (n) the indices 0..n-1 sorted by key (n) descending, ties by index
// ascending. TSR_ENOMEM on allocation failure.
tsr_status sched_order_desc(const double *key, int n, int32_t *order);

#endif
