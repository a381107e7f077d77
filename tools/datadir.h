// tools/datadir.h — where the CLI finds its own files: the model presets and cost files of
// configs/ and the Python scripts of tools/ (the report, the plan timeline).
//
// The data folder is, first that exists: $TESSERA_DATA_DIR; PREFIX/share/tessera beside an
// installed binary (PREFIX/bin/tessera, `cmake --install`); the source tree the binary was
// built from (TESSERA_SOURCE_DIR, fixed at build time). So a clone's build/tools/tessera and
// an installed one find the same files, and a moved clone can be pointed at with the variable.
#ifndef TESSERA_TOOLS_DATADIR_H
#define TESSERA_TOOLS_DATADIR_H

#include <stddef.h>

#include "core/err.h"

// The data folder (static storage; never NULL: the source tree when nothing else is found).
const char *datadir_root(void);

// DIR/rel of the data folder into out (n bytes). TSR_EINVAL when it does not fit.
tsr_status datadir_path(const char *rel, char *out, size_t n);

// What `--config ARG` names: ARG itself when it holds a '/' or names an existing file;
// else the preset configs/model/ARG.conf of the data folder (ARG may end in .conf) when
// there is one, else ARG (whose load then fails naming it). The result is ARG or static
// storage of this function, valid until the next call.
const char *datadir_config(const char *arg);

#endif
