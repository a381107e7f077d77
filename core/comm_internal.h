// core/comm_internal.h — what the communication backends of core/ share with comm.c (not
// a public header: only core/comm*.c include it).
#ifndef TESSERA_CORE_COMM_INTERNAL_H
#define TESSERA_CORE_COMM_INTERNAL_H

#include <mpi.h>
#include "core/comm.h"

// MPI counts are int: transfers are cut into pieces of at most this many elements.
enum { COMM_CHUNK = 1 << 30 };

struct comm_group {
  MPI_Comm comm;  // MPI_COMM_NULL for a world of one (no MPI)
  int size, rank, first;
};

// TSR_OK, or TSR_ECOMM with MPI's message for `what`.
tsr_status comm_mpi_check(int rc, const char *what);

#endif
