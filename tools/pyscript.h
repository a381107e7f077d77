// tools/pyscript.h — running one of tools/' Python scripts (the report, the plan timeline)
// with the Python that has Debian's matplotlib (tools/setup.sh: python3-matplotlib).
//
// The script is tools/NAME of the data folder (tools/datadir.h: the source tree, or
// PREFIX/share/tessera for an installed binary); the interpreter is $TESSERA_SYSTEM_PYTHON, else /usr/bin/python3 (Debian's, where apt puts
// matplotlib: a python3 first on PATH, a pyenv's or a venv's, may lack it), else python3
// on PATH.
#ifndef TESSERA_TOOLS_PYSCRIPT_H
#define TESSERA_TOOLS_PYSCRIPT_H

#include "core/err.h"

// Runs `python SCRIPT args...` (args: NULL-terminated), its output passed through, and
// waits. TSR_OK when it exits 0; else TSR_EIO naming the script and its exit status (the
// script has printed why), or the interpreter that could not be started.
tsr_status pyscript_run(const char *name, char *const *args);
// The same with the python of the reference tools' venv (tools/setup_venv.sh: torch,
// transformers, the caption encoders): $TESSERA_PYTHON, else /opt/tessera/venv/bin/python;
// TSR_EIO naming it and setup_venv.sh when it is not there.
tsr_status pyscript_run_venv(const char *name, char *const *args);

#endif
